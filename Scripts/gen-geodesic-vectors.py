#!/usr/bin/env python3
"""Generate Tests/GeofenceCoreTests/Resources/geodesic-vectors.txt.

Reference solutions of the inverse geodesic problem on WGS84, computed with
GeographicLib (pip install geographiclib), for the Swift port in
Sources/GeofenceCore/Geodesy. The random generator is seeded, so rerunning
with the same geographiclib version reproduces the file byte for byte.

Usage: python3 Scripts/gen-geodesic-vectors.py > Tests/GeofenceCoreTests/Resources/geodesic-vectors.txt

File format: '#' lines are comments, '[name]' starts a section, every other
line is 'lat1 lon1 lat2 lon2 s12 azi1 azi2' (degrees, metres, degrees) with
every number written by repr(), i.e. the shortest string that reads back as
the same double.
"""

import math
import random
import sys

import geographiclib
from geographiclib.geodesic import Geodesic

SEED = 20240601
G = Geodesic.WGS84
rng = random.Random(SEED)


def uniform_point():
    """A point uniform on the sphere (latitude by equal area)."""
    lat = math.degrees(math.asin(2 * rng.random() - 1))
    lon = 360 * rng.random() - 180
    return lat, lon


def rounded(x, places):
    """Round inputs so the file stays small; the reference is computed from the rounded values."""
    return round(x, places)


def destination(lat1, lon1, azi, s):
    """The point at distance s along azimuth azi from (lat1, lon1)."""
    d = G.Direct(lat1, lon1, azi, s)
    return d["lat2"], d["lon2"]


sections = []


def section(name, pairs):
    sections.append((name, pairs))


# Random short pairs: start uniform on the sphere, direction uniform, distance uniform in (0, 1000 km].
pairs = []
for _ in range(10000):
    lat1, lon1 = uniform_point()
    azi = 360 * rng.random()
    s = 1e6 * (1 - rng.random())
    lat2, lon2 = destination(lat1, lon1, azi, s)
    pairs.append(tuple(rounded(v, 11) for v in (lat1, lon1, lat2, lon2)))
section("random-short", pairs)

# Random long pairs: both ends uniform on the sphere (any distance up to antipodal).
pairs = []
for _ in range(2500):
    lat1, lon1 = uniform_point()
    lat2, lon2 = uniform_point()
    pairs.append(tuple(rounded(v, 11) for v in (lat1, lon1, lat2, lon2)))
section("random-long", pairs)

# Polar: at and near the poles, across them, pole to pole.
pairs = []
for sign in (1, -1):
    pole = 90.0 * sign
    for _ in range(40):  # from a pole to anywhere
        lat2, lon2 = uniform_point()
        pairs.append((pole, rounded(360 * rng.random() - 180, 6), rounded(lat2, 11), rounded(lon2, 11)))
    for lon1 in (0.0, 45.0, -90.0, 180.0):  # the same pole named with different longitudes
        pairs.append((pole, lon1, pole, rounded(360 * rng.random() - 180, 6)))
    for lon1 in (0.0, 30.0, -120.0, 180.0):  # pole to pole
        pairs.append((pole, lon1, -pole, rounded(360 * rng.random() - 180, 6)))
    for k in range(1, 10):  # straight across the pole, 10^-k degrees from it
        lat = sign * (90 - 10.0 ** -k)
        lon = rounded(360 * rng.random() - 180, 6)
        pairs.append((lat, lon, lat, lon - 180 if lon > 0 else lon + 180))
    for _ in range(100):  # short random pairs around the pole, often across it
        lat1 = sign * (90 - 0.2 * rng.random())
        lat2 = sign * (90 - 0.2 * rng.random())
        pairs.append((rounded(lat1, 11), rounded(360 * rng.random() - 180, 9),
                      rounded(lat2, 11), rounded(360 * rng.random() - 180, 9)))
    for _ in range(50):  # to a pole from nearby
        pairs.append((rounded(sign * (90 - 10 * rng.random()), 11), rounded(360 * rng.random() - 180, 9),
                      pole, 0.0))
section("polar", pairs)

# Equatorial: both ends on the equator, including nearly antipodal, where beyond
# (1 - f) * 180 degrees of longitude the shortest path leaves the equator over a pole.
pairs = []
for _ in range(100):
    lon1 = 360 * rng.random() - 180
    pairs.append((0.0, rounded(lon1, 11), 0.0, rounded(lon1 + 180 * rng.random(), 11)))
for _ in range(150):
    lon1 = rounded(360 * rng.random() - 180, 9)
    pairs.append((0.0, lon1, 0.0, rounded(lon1 + 179 + rng.random(), 11)))
transition = (1 - G.f) * 180
for d in (-1e-3, -1e-6, -1e-9, 0.0, 1e-9, 1e-6, 1e-3):
    pairs.append((0.0, 0.0, 0.0, transition + d))
for lon2 in (90.0, 179.0, 179.5, 179.9, 179.99, 179.999999, 180.0, -180.0):
    pairs.append((0.0, 0.0, 0.0, lon2))
for lat in (1e-300, 1e-20, 1e-10):  # indistinguishable from the equator after rounding to 2^-57 degrees
    pairs.append((lat, 0.0, -lat, 100.0))
    pairs.append((lat, 0.0, 0.0, 179.9))
section("equatorial", pairs)

# Across the antimeridian: longitudes 179.9x to -179.9x.
pairs = []
for _ in range(200):
    lat1 = rounded(170 * rng.random() - 85, 11)
    lat2 = rounded(lat1 + 0.2 * (rng.random() - 0.5), 11)
    lon1 = rounded(179.9 + 0.1 * rng.random(), 11)
    lon2 = rounded(-179.9 - 0.1 * rng.random(), 11)
    pairs.append((lat1, lon1, lat2, lon2))
for _ in range(50):  # 180 and -180 are the same meridian
    lat1 = rounded(180 * rng.random() - 90, 11)
    lat2 = rounded(180 * rng.random() - 90, 11)
    pairs.append((lat1, 180.0, lat2, -180.0))
section("antimeridian", pairs)

# Coincident points, including the same point named two ways.
pairs = []
for _ in range(60):
    lat, lon = uniform_point()
    lat, lon = rounded(lat, 11), rounded(lon, 11)
    pairs.append((lat, lon, lat, lon))
for lat in (0.0, 45.0, -60.0, 89.999999):
    pairs.append((lat, 180.0, lat, -180.0))
for lat in (0.0, 90.0, -90.0):
    pairs.append((lat, 0.0, lat, 0.0))
section("coincident", pairs)

# Tiny distances: 0.1 mm to 1 m, log-uniform, full-precision inputs.
pairs = []
for _ in range(300):
    lat1, lon1 = uniform_point()
    s = 10 ** (-4 + 4 * rng.random())
    lat2, lon2 = destination(lat1, lon1, 360 * rng.random(), s)
    pairs.append((lat1, lon1, lat2, lon2))
section("tiny", pairs)

# Nearly antipodal: the antipode perturbed by up to 1 degree, and by up to 1e-6 degree,
# with extra weight near the equator where the astroid start is needed.
pairs = []
for scale, count in ((1.0, 300), (1e-6, 150)):
    for _ in range(count):
        lat1, lon1 = uniform_point()
        if rng.random() < 0.5:
            lat1 = 5 * (2 * rng.random() - 1)
        lat2 = -lat1 + scale * (2 * rng.random() - 1)
        lon2 = lon1 + 180 + scale * (2 * rng.random() - 1)
        pairs.append((lat1, lon1, max(-90.0, min(90.0, lat2)), lon2))
for lat1 in (0.0, 1.0, 10.0, 45.0, 80.0):  # exactly antipodal
    pairs.append((lat1, 0.0, -lat1, 180.0))
section("nearly-antipodal", pairs)


def main():
    out = sys.stdout
    out.write("# Reference solutions of the inverse geodesic problem on WGS84.\n")
    out.write("# Generated by Scripts/gen-geodesic-vectors.py (seed %d) with geographiclib %s,\n"
              % (SEED, geographiclib.__version__))
    out.write("# Geodesic.WGS84.Inverse. Columns: lat1 lon1 lat2 lon2 s12 azi1 azi2\n")
    out.write("# (degrees, metres, degrees; azimuths clockwise from north at each end).\n")
    for name, pairs in sections:
        out.write("[%s]\n" % name)
        for lat1, lon1, lat2, lon2 in pairs:
            r = G.Inverse(lat1, lon1, lat2, lon2)
            out.write(" ".join(repr(float(v)) for v in
                               (lat1, lon1, lat2, lon2, r["s12"], r["azi1"], r["azi2"])))
            out.write("\n")


if __name__ == "__main__":
    main()
