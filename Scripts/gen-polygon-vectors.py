#!/usr/bin/env python3
"""Generate Tests/GeofenceCoreTests/Resources/polygon-vectors.txt.

Reference containment and signed distance to the boundary for points near polygons whose edges are
geodesics on WGS84, computed with GeographicLib (pip install geographiclib) by methods that share nothing
with the Swift code in Sources/GeofenceCore/Model/RegionPolygon.swift:

- Distance: for each edge A-B, GeographicLib's geodesic line from A to B (InverseLine) and a golden-section
  search on the arc position s of min over s of Inverse(P, Position(s)).s12, narrowed until the bracket is
  under 0.05 mm (the distance is then within 0.05 mm of the minimum, since it changes by at most the step).
  Only edges that could be nearest are searched: a bound from straight chords (the chord to the edge's
  segment, less and plus its sag) drops the others, with slack, so no edge that might be nearest is skipped.
- Containment: the winding number of the rings about P, from GeographicLib's azimuths: the sum over each
  ring's edges of the change in azimuth of the geodesic from P to the edge's ends. An edge that turns the
  azimuth by more than 150 degrees (P is close to it) is split at its geodesic midpoint until no piece does.
  A point is inside when it is inside an odd number of rings (an outer ring and not one of its holes).

The random generator is seeded, so rerunning with the same geographiclib version gives the same file.

Usage: python3 Scripts/gen-polygon-vectors.py > Tests/GeofenceCoreTests/Resources/polygon-vectors.txt

File format: '#' lines are comments. 'polygon NAME' starts a polygon; each following 'ring LAT LON LAT LON ...'
line is one ring (closed: the last position repeats the first), 'part' starts a new part (the next ring is its
outer ring); each 'P LAT LON D' line is a point and its signed geodesic distance to the boundary in metres
(negative inside).
"""

import math
import random
import sys

import geographiclib
from geographiclib.geodesic import Geodesic

SEED = 20261201
G = Geodesic.WGS84
rng = random.Random(SEED)
A = G.a
F = G.f
E2 = F * (2 - F)
R_MIN = A * (1 - E2)


def ecef(lat, lon):
    la, lo = math.radians(lat), math.radians(lon)
    n = A / math.sqrt(1 - E2 * math.sin(la) ** 2)
    return (n * math.cos(la) * math.cos(lo), n * math.cos(la) * math.sin(lo), n * (1 - E2) * math.sin(la))


def seg_chord(p, a, b):
    ab = [b[i] - a[i] for i in range(3)]
    d = [p[i] - a[i] for i in range(3)]
    ll = sum(x * x for x in ab)
    t = max(0.0, min(1.0, sum(d[i] * ab[i] for i in range(3)) / ll))
    q = [d[i] - ab[i] * t for i in range(3)]
    return math.sqrt(sum(x * x for x in q)), math.sqrt(ll)


def edge_distance(lat, lon, a, b):
    line = G.InverseLine(a[0], a[1], b[0], b[1], Geodesic.STANDARD | Geodesic.DISTANCE_IN)
    length = line.s13

    def f(s):
        x = line.Position(s, Geodesic.LATITUDE | Geodesic.LONGITUDE)
        return G.Inverse(lat, lon, x["lat2"], x["lon2"], Geodesic.DISTANCE)["s12"]

    lo, hi = 0.0, length
    g = (math.sqrt(5) - 1) / 2
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = f(x1), f(x2)
    while hi - lo > 5e-5:
        if f1 < f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - g * (hi - lo)
            f1 = f(x1)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + g * (hi - lo)
            f2 = f(x2)
    return min(f1, f2, f(0.0), f(length))


def boundary_distance(lat, lon, rings):
    p = ecef(lat, lon)
    bounds = []
    for ring in rings:
        pts = [ecef(*v) for v in ring]
        for i in range(1, len(ring)):
            c, length = seg_chord(p, pts[i - 1], pts[i])
            sag = length * length / (8 * R_MIN) * 1.05 + 1e-3
            bounds.append((c - sag, c + sag, ring[i - 1], ring[i]))
    best_upper = min(u for _, u, _, _ in bounds)
    # A geodesic is at most 0.2 % longer than its chord at these distances.
    cut = best_upper * 1.002 + 0.01
    near = [(a, b) for l, _, a, b in bounds if l <= cut]
    if not near:
        raise RuntimeError(f"no edge near {lat} {lon}: {bounds[:3]} {cut}")
    return min(edge_distance(lat, lon, a, b) for a, b in near)


def azimuth(lat, lon, v):
    return G.Inverse(lat, lon, v[0], v[1], Geodesic.AZIMUTH)["azi1"]


def turn(lat, lon, a, b, za, zb, depth=0):
    d = (zb - za + 180) % 360 - 180
    if abs(d) <= 150 or depth > 40:
        return d
    m = G.InverseLine(a[0], a[1], b[0], b[1], Geodesic.STANDARD | Geodesic.DISTANCE_IN)
    mid = m.Position(m.s13 / 2, Geodesic.LATITUDE | Geodesic.LONGITUDE)
    mv = (mid["lat2"], mid["lon2"])
    zm = azimuth(lat, lon, mv)
    return turn(lat, lon, a, mv, za, zm, depth + 1) + turn(lat, lon, mv, b, zm, zb, depth + 1)


def inside(lat, lon, rings):
    count = 0
    for ring in rings:
        z = [azimuth(lat, lon, v) for v in ring]
        w = sum(turn(lat, lon, ring[i - 1], ring[i], z[i - 1], z[i]) for i in range(1, len(ring)))
        if abs(round(w / 360)) % 2 == 1:
            count += 1
    return count % 2 == 1


def direct(lat, lon, azi, s):
    d = G.Direct(lat, lon, azi, s)
    return (round(d["lat2"], 7), round((d["lon2"] + 180) % 360 - 180, 7))


def star(lat, lon, n, rmin, rmax, clockwise=False):
    angles = sorted(rng.uniform(0, 360) for _ in range(n))
    ring = [direct(lat, lon, a, rng.uniform(rmin, rmax)) for a in angles]
    # Azimuths clockwise from north: increasing azimuth is clockwise seen from above.
    if not clockwise:
        ring.reverse()
    ring.append(ring[0])
    return ring


def points_near(parts, lat, lon, reach, count):
    rings = [r for part in parts for r in part]
    out = []
    for k in range(count):
        if k % 2 == 0:
            # Near a random edge: a point on it, moved sideways by up to 60 m (often under a metre).
            ring = rng.choice(rings)
            i = rng.randrange(1, len(ring))
            line = G.InverseLine(ring[i - 1][0], ring[i - 1][1], ring[i][0], ring[i][1], Geodesic.STANDARD | Geodesic.DISTANCE_IN)
            x = line.Position(rng.uniform(0, line.s13), Geodesic.STANDARD | Geodesic.DISTANCE_IN)
            off = rng.choice([1e-3, 0.01, 0.3, 2, 60]) * rng.uniform(-1, 1)
            q = G.Direct(x["lat2"], x["lon2"], x["azi2"] + 90, off)
            plat, plon = q["lat2"], q["lon2"]
        else:
            q = G.Direct(lat, lon, rng.uniform(0, 360), reach * 1.3 * math.sqrt(rng.random()))
            plat, plon = q["lat2"], q["lon2"]
        plat, plon = round(plat, 9), round((plon + 180) % 360 - 180, 9)
        d = boundary_distance(plat, plon, rings)
        if inside(plat, plon, rings):
            d = -d
        out.append((plat, plon, d))
    return out


def emit(name, parts, pts):
    print("polygon", name)
    for k, part in enumerate(parts):
        if k > 0:
            print("part")
        for ring in part:
            print("ring", " ".join(f"{la!r} {lo!r}" for la, lo in ring))
    for la, lo, d in pts:
        print(f"P {la!r} {lo!r} {d:.5f}")


def uniform_point():
    return math.degrees(math.asin(2 * rng.random() - 1)), 360 * rng.random() - 180


print("# polygon-vectors.txt: generated by Scripts/gen-polygon-vectors.py with geographiclib", geographiclib.__version__)
print("# seed", SEED)

# Random star-shaped polygons (concave), building- to district-sized, anywhere on earth; some with a hole.
for k in range(60):
    lat, lon = uniform_point()
    lat = max(-85, min(85, lat))
    size = 10 ** rng.uniform(1.5, 3.7)
    n = rng.randint(5, 40)
    outer = star(lat, lon, n, size * 0.5, size, clockwise=rng.random() < 0.3)
    parts = [[outer]]
    if k % 4 == 0:
        parts[0].append(star(lat, lon, rng.randint(3, 8), size * 0.1, size * 0.35, clockwise=True))
    emit(f"random-{k}", parts, points_near(parts, lat, lon, size, 150))

# Large polygons with long edges (up to about 90 km).
for k in range(3):
    lat, lon = uniform_point()
    lat = max(-70, min(70, lat))
    while True:
        outer = star(lat, lon, 16, 60_000, 120_000)
        longest = max(G.Inverse(*outer[i - 1], *outer[i])["s12"] for i in range(1, len(outer)))
        if longest < 95_000:
            break
    parts = [[outer]]
    emit(f"large-{k}", parts, points_near(parts, lat, lon, 150_000, 100))

# Across the antimeridian.
parts = [[star(-16.5, 179.995, 24, 1500, 4000)]]
emit("antimeridian", parts, points_near(parts, -16.5, 179.995, 4000, 300))

# Around the north pole (it is inside) and the south pole.
ring = [direct(90, 0, a, 50_000 + 5000 * math.sin(3 * math.radians(a))) for a in range(0, 360, 6)][::-1]
ring.append(ring[0])
emit("north-pole", [[ring]], points_near([[ring]], 90, 0, 55_000, 300))
ring = [direct(-90, 0, 180 + a, 30_000) for a in range(0, 360, 8)][::-1]
ring.append(ring[0])
emit("south-pole", [[ring]], points_near([[ring]], -90, 0, 30_000, 200))

# Very thin: 3 km long, 2 m and 20 cm wide.
for width, name in ((2.0, "thin-2m"), (0.2, "thin-20cm")):
    lat, lon = 47.3, 8.5
    end = G.Direct(lat, lon, 63, 3000)
    a = direct(lat, lon, 63 - 90, width / 2)
    b = direct(end["lat2"], end["lon2"], end["azi2"] - 90, width / 2)
    c = direct(end["lat2"], end["lon2"], end["azi2"] + 90, width / 2)
    d = direct(lat, lon, 63 + 90, width / 2)
    ring = [a, d, c, b, a]
    emit(name, [[ring]], points_near([[ring]], lat, lon, 1500, 200))

# A multipolygon: two parts, one with a hole.
p1 = star(-33.9, 18.4, 16, 800, 1500)
h1 = star(-33.9, 18.4, 6, 150, 400, clockwise=True)
c2 = G.Direct(-33.9, 18.4, 90, 5000)
p2 = star(c2["lat2"], c2["lon2"], 10, 500, 1200)
parts = [[p1, h1], [p2]]
emit("multi", parts, points_near(parts, -33.9, 18.43, 4000, 300))
