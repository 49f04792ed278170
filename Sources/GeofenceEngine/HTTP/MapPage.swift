import Foundation
import GeofenceCore

/// The map (Docs/map.md): one self-contained HTML page drawing the regions, the vehicles' last fixes and the
/// latest events with Leaflet, as Debian's `libjs-leaflet` installs it, inlined (its script and style in the
/// page), on a plain graticule, or on map tiles when the operator names a tile server (`MapTiles`). Nothing
/// else is fetched from anywhere; without tiles, nothing at all (the page's Content-Security-Policy).
/// Without Leaflet installed, the page is the same panel with the regions and vehicles drawn on an SVG
/// (`leafletMissing` says so).
///
/// The same page is served live at `/map` (no data in it: it asks `/v1/` with the token of its URL's
/// fragment, and follows `/v1/events/stream`) and written by `geofence map` as a snapshot (the data in it,
/// nothing asked).
package enum MapPage {
    /// Where Leaflet is read from: Debian's `libjs-leaflet`, or `GEOFENCE_LEAFLET_DIR`.
    package static let leafletDirectory =
        ProcessInfo.processInfo.environment["GEOFENCE_LEAFLET_DIR"] ?? "/usr/share/javascript/leaflet"

    /// Leaflet's script and style, read once (nil: not there, or not fit to be inlined).
    static let leaflet: (script: String, style: String)? = {
        func read(_ name: String) -> String? {
            guard let text = try? String(contentsOfFile: leafletDirectory + "/" + name, encoding: .utf8) else {
                return nil
            }
            // Its source map is not inlined; a closing tag would end the page's element early.
            let kept = text.split(separator: "\n", omittingEmptySubsequences: false)
                .filter { !$0.hasPrefix("//# sourceMappingURL=") && !$0.hasPrefix("/*# sourceMappingURL=") }
                .joined(separator: "\n")
            let lower = kept.lowercased()
            guard !lower.contains("</script"), !lower.contains("</style"), !lower.contains("<!--") else { return nil }
            return kept
        }
        guard let script = read("leaflet.js"), let style = read("leaflet.css") else { return nil }
        return (script, style)
    }()

    /// Why the page is drawn without Leaflet, for the log or standard error; nil when Leaflet is there.
    package static var leafletMissing: String? {
        leaflet == nil
            ? "Leaflet is not in \(leafletDirectory) (apt-get install libjs-leaflet): the map is drawn as a plain SVG"
            : nil
    }

    /// The live page: no data, so it is served without a token.
    package static func live(tiles: MapTiles?) -> String { page(data: nil, tiles: tiles) }

    /// A snapshot: `regions` as `list --json`, `vehicles` as `vehicles --json`, `events` the latest ones,
    /// oldest first, each the event's JSON.
    package static func snapshot(
        regions: [JSONValue], vehicles: [JSONValue], events: [JSONValue], made: Date, tiles: MapTiles? = nil
    ) -> String {
        let data: JSONObject = [
            "regions": .array(regions), "vehicles": .array(vehicles), "events": .array(events),
            "made": .string(TimestampParser.format(made)),
        ]
        return page(data: .object(data), tiles: tiles)
    }

    /// The page's Content-Security-Policy: nothing from elsewhere but, with tiles, images from their server.
    static func policy(tiles: MapTiles?) -> String {
        var policy = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'"
        if let tiles { policy += "; img-src \(tiles.source)" }
        return policy
    }

    /// The page with `data` in it (nil: the live page). `<` is written `\u003c` in the JSON, so that no
    /// string in it (a region's name) can end the script element. The data goes in last, so that nothing
    /// in it is taken for one of the template's places.
    static func page(data: JSONValue?, tiles: MapTiles?) -> String {
        let json = (data ?? .null).serialized().replacingOccurrences(of: "<", with: "\\u003c")
        var html = template.replacingOccurrences(of: "__GEOFENCE_CSP__", with: policy(tiles: tiles))
        if let leaflet {
            let tilesJSON = tiles.map {
                JSONValue.object(["url": .string($0.template), "attribution": .string($0.attribution)]).serialized()
                    .replacingOccurrences(of: "<", with: "\\u003c")
            }
            html = html.replacingOccurrences(of: "/*__RENDERER_STYLE__*/", with: leaflet.style + "\n" + leafletStyle)
                .replacingOccurrences(of: "__RENDERER_BODY__", with: leafletBody)
                .replacingOccurrences(
                    of: "/*__RENDERER_SCRIPT__*/",
                    with: leaflet.script + "\n</script>\n<script>\n\"use strict\";\nconst TILES = "
                        + (tilesJSON ?? "null")
                        + ";\n" + leafletScript)
        } else {
            html = html.replacingOccurrences(of: "/*__RENDERER_STYLE__*/", with: svgStyle)
                .replacingOccurrences(of: "__RENDERER_BODY__", with: svgBody)
                .replacingOccurrences(of: "/*__RENDERER_SCRIPT__*/", with: svgScript)
        }
        return html.replacingOccurrences(of: "\"__GEOFENCE_DATA__\"", with: json)
    }

    /// Width of the events' panel on the right, in CSS pixels; the map takes the rest of the window.
    package static let panelWidth = 320
    /// Margin kept around the data in the map, in CSS pixels.
    package static let margin = 40

    // The page. Colours are fixed (Docs/map.md lists them; the tests look for them in screenshots).
    private static let template = #"""
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta http-equiv="Content-Security-Policy" content="__GEOFENCE_CSP__">
        <meta name="referrer" content="no-referrer">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>geofence map</title>
        <style>
        html, body { margin: 0; height: 100%; overflow: hidden; font: 13px/1.35 sans-serif; color: #1f2937; background: #f5f3ee; }
        #map { position: absolute; left: 0; top: 0; width: calc(100vw - 320px); height: 100vh; display: block; background: #f5f3ee; }
        #panel { position: absolute; right: 0; top: 0; width: 320px; height: 100vh; box-sizing: border-box; overflow-y: auto;
          background: #ffffff; border-left: 1px solid #d6d3cc; padding: 8px 10px; }
        #panel h1 { font-size: 15px; margin: 0 0 4px; }
        #status { color: #6b7280; margin-bottom: 8px; word-wrap: break-word; }
        #events { list-style: none; margin: 0; padding: 0; }
        #events li { border-top: 1px solid #ece9e2; padding: 4px 0; }
        #events .t { color: #6b7280; font-size: 11px; }
        #events .enter { color: #15803d; } #events .exit { color: #b91c1c; } #events .dwell { color: #1d4ed8; }
        #login { margin-top: 8px; } #login input { width: 100%; box-sizing: border-box; margin: 4px 0; }
        /*__RENDERER_STYLE__*/
        </style>
        </head>
        <body data-state="loading" data-events="0">
        __RENDERER_BODY__
        <div id="panel">
          <h1>geofence</h1>
          <div id="status">loading</div>
          <form id="login" hidden><label>Token of the HTTP API (scope read)<input id="token" type="password" autocomplete="off"></label><button>Show</button></form>
          <ol id="events"></ol>
        </div>
        <script id="data" type="application/json">"__GEOFENCE_DATA__"</script>
        <script>
        "use strict";
        /*__RENDERER_SCRIPT__*/
        function showEvents() {
          const list = document.getElementById("events");
          while (list.firstChild) list.removeChild(list.firstChild);
          for (const e of state.events.slice().reverse()) {
            const li = document.createElement("li");
            li.dataset.id = e.id;
            const what = document.createElement("span");
            what.className = e.type;
            what.textContent = `${e.type} ${e.region || ""}`;
            li.append(what, ` ${e.subject || ""}` + (e.state && e.type !== "enter" && e.type !== "exit" ? ` (${e.state})` : ""));
            const t = document.createElement("div");
            t.className = "t";
            t.textContent = e.time || "";
            li.append(t);
            list.append(li);
          }
          document.body.dataset.events = String(state.events.length);
          if (state.last) document.body.dataset.lastEvent = state.last;
        }

        // An event moves its vehicle to the event's fix and says which regions it is inside.
        function apply(e) {
          state.events.push(e);
          if (state.events.length > KEEP) state.events.splice(0, state.events.length - KEEP);
          state.last = e.id;
          if (e.type === "region-status") {
            const r = state.regions.find(r => r.id === e.region);
            if (r) r.status = e.state;
          }
          if (!e.subject) return;
          const v = state.vehicles.get(e.subject) || { subject: e.subject, inside: [] };
          if (e.fix) { v.lastFix = e.fix; v.lastFixTime = e.time; }
          if (e.region) {
            const inside = new Set(v.inside || []);
            if (e.type === "enter" || e.state === "inside") inside.add(e.region);
            if (e.type === "exit" || e.state === "outside") inside.delete(e.region);
            v.inside = [...inside];
          }
          state.vehicles.set(e.subject, v);
        }

        function load(data) {
          state.regions = data.regions || [];
          state.vehicles = new Map((data.vehicles || []).map(v => [v.subject, v]));
        }

        // The live page: the token from the URL's fragment (#token=...), which a browser never sends.
        const token = new URLSearchParams(location.hash.slice(1)).get("token");
        async function api(path, init) {
          const r = await fetch(path, Object.assign({ headers: { Authorization: "Bearer " + token }, cache: "no-store" }, init || {}));
          if (!r.ok) {
            let why = r.status + "";
            try { why += " " + (await r.json()).error.message; } catch (_) {}
            throw Object.assign(new Error(why), { status: r.status });
          }
          return r;
        }

        async function refresh() {
          const [regions, vehicles] = await Promise.all([api("/v1/regions"), api("/v1/vehicles")]);
          const data = { regions: await regions.json(), vehicles: await vehicles.json() };
          load(data);
          draw();
        }

        // Server-Sent Events through fetch() (EventSource cannot send the Authorization header), resumed
        // after the last event handled.
        async function follow() {
          for (;;) {
            try {
              const headers = { Authorization: "Bearer " + token };
              if (state.last) headers["Last-Event-ID"] = state.last;
              const r = await fetch("/v1/events/stream", { headers, cache: "no-store" });
              if (r.status === 404) { state.last = null; await start(); return; }
              if (!r.ok) throw new Error("the stream answered " + r.status);
              document.body.dataset.state = "live";
              $status.textContent = "live: following the events";
              const reader = r.body.getReader(), decoder = new TextDecoder();
              let buffer = "";
              for (;;) {
                const { value, done } = await reader.read();
                if (done) break;
                buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
                let cut;
                let changed = false;
                while ((cut = buffer.indexOf("\n\n")) >= 0) {
                  const message = buffer.slice(0, cut);
                  buffer = buffer.slice(cut + 2);
                  const data = message.split("\n").filter(l => l.startsWith("data:")).map(l => l.slice(5).replace(/^ /, "")).join("\n");
                  if (data) { apply(JSON.parse(data)); changed = true; }
                }
                if (changed) { draw(); showEvents(); }
              }
            } catch (err) {
              $status.textContent = "reconnecting: " + err.message;
            }
            document.body.dataset.state = "reconnecting";
            await new Promise(ok => setTimeout(ok, 1000));
          }
        }

        async function start() {
          try {
            const page = await (await api("/v1/events?latest=" + KEEP)).json();
            state.events = [];
            for (const e of page.events) apply(e);
            await refresh();
            showEvents();
          } catch (err) {
            document.body.dataset.state = "error";
            $status.textContent = "cannot read the engine's API: " + err.message;
            if (err.status === 401) document.getElementById("login").hidden = false;
            return;
          }
          if (!state.refreshing) {
            state.refreshing = setInterval(() => refresh().catch(err => { $status.textContent = "refresh failed: " + err.message; }), 5000);
          }
          follow();
        }

        const embedded = JSON.parse(document.getElementById("data").textContent);
        if (embedded) {
          load(embedded);
          for (const e of embedded.events || []) state.events.push(e), state.last = e.id;
          draw();
          showEvents();
          $status.textContent = `snapshot of ${embedded.made}: ${state.regions.length} regions, ${state.vehicles.size} vehicles`;
          document.body.dataset.state = "snapshot";
        } else if (!token) {
          document.body.dataset.state = "login";
          $status.textContent = "open this page as /map#token=TOKEN (a read token: geofence token add NAME --scope read)";
          document.getElementById("login").hidden = false;
        } else {
          start();
        }
        document.getElementById("login").addEventListener("submit", ev => {
          ev.preventDefault();
          location.hash = "token=" + encodeURIComponent(document.getElementById("token").value.trim());
          location.reload();
        });
        </script>
        </body>
        </html>

        """#

    // The SVG renderer: the page without Leaflet (Leaflet not installed).
    private static let svgStyle = #"""
        .grid { stroke: #e2ded4; stroke-width: 1; shape-rendering: crispEdges; }
        .region { fill: #2563eb; fill-opacity: 0.25; stroke: #2563eb; stroke-width: 2; }
        .region.occupied { fill: #16a34a; stroke: #16a34a; }
        .region.inactive { fill: #9ca3af; stroke: #6b7280; stroke-dasharray: 6 4; }
        .accuracy { fill: #dc2626; fill-opacity: 0.12; stroke: none; }
        .vehicle { fill: #dc2626; stroke: #ffffff; stroke-width: 2; }
        .label { font-size: 12px; fill: #111827; paint-order: stroke; stroke: #f5f3ee; stroke-width: 3px; }
        .scale { stroke: #111827; stroke-width: 2; fill: none; }
        """#
    private static let svgBody = #"""
        <svg id="map" xmlns="http://www.w3.org/2000/svg"></svg>
        """#
    private static let svgScript = #"""
        const MARGIN = 40, EARTH = 6371008.8, KEEP = 50, NS = "http://www.w3.org/2000/svg";
        const state = { regions: [], vehicles: new Map(), events: [], last: null };
        const svg = document.getElementById("map");
        const $status = document.getElementById("status");

        function el(name, attrs, parent) {
          const e = document.createElementNS(NS, name);
          for (const k in attrs) e.setAttribute(k, attrs[k]);
          if (parent) parent.appendChild(e);
          return e;
        }

        // The rings of a region's polygon (GeoJSON Polygon or MultiPolygon), as [lon, lat] points.
        function rings(region) {
          const g = region.polygon;
          if (!g) return [];
          if (g.type === "Polygon") return g.coordinates;
          if (g.type === "MultiPolygon") return g.coordinates.flat();
          return [];
        }

        // Equirectangular around the data's centre (lat0, lon0): metres east and north of it. Then fitted:
        // the extent of everything (circles with their radius) centred in the map, MARGIN pixels kept.
        function projection(width, height) {
          const pts = [];
          for (const r of state.regions) {
            if (r.polygon) for (const ring of rings(r)) for (const p of ring) pts.push([p[1], p[0], 0]);
            else pts.push([r.lat, r.lon, r.radius]);
          }
          for (const v of state.vehicles.values()) if (v.lastFix) pts.push([v.lastFix.lat, v.lastFix.lon, 0]);
          if (pts.length === 0) pts.push([0, 0, 0]);
          const lats = pts.map(p => p[0]), lons = pts.map(p => p[1]);
          const lat0 = (Math.min(...lats) + Math.max(...lats)) / 2, lon0 = (Math.min(...lons) + Math.max(...lons)) / 2;
          const k = Math.PI / 180 * EARTH, kx = k * Math.cos(lat0 * Math.PI / 180);
          const local = (lat, lon) => [(lon - lon0) * kx, (lat - lat0) * k];
          let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
          for (const p of pts) {
            const [x, y] = local(p[0], p[1]);
            x0 = Math.min(x0, x - p[2]); x1 = Math.max(x1, x + p[2]);
            y0 = Math.min(y0, y - p[2]); y1 = Math.max(y1, y + p[2]);
          }
          const dx = Math.max(x1 - x0, 100), dy = Math.max(y1 - y0, 100);
          const s = Math.max(Math.min((width - 2 * MARGIN) / dx, (height - 2 * MARGIN) / dy), 1e-9);
          const mx = (x0 + x1) / 2, my = (y0 + y1) / 2;
          return {
            s, lat0, lon0, kx, k,
            xy(lat, lon) { const [x, y] = local(lat, lon); return [width / 2 + (x - mx) * s, height / 2 - (y - my) * s]; },
            latlon(px, py) { return [lat0 + ((height / 2 - py) / s + my) / k, lon0 + ((px - width / 2) / s + mx) / kx]; },
          };
        }

        // A round number of at most `x`: 1, 2 or 5 times a power of ten.
        function nice(x) {
          const p = Math.pow(10, Math.floor(Math.log10(x)));
          return [5, 2, 1].map(m => m * p).find(v => v <= x) || p;
        }

        function draw() {
          const width = svg.clientWidth, height = svg.clientHeight;
          svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
          while (svg.firstChild) svg.removeChild(svg.firstChild);
          const P = projection(width, height);
          // A graticule of whole steps of latitude and longitude.
          const [latTop, lonLeft] = P.latlon(0, 0), [latBottom, lonRight] = P.latlon(width, height);
          const step = nice((lonRight - lonLeft) / 4 || 1);
          for (let lon = Math.ceil(lonLeft / step) * step; lon <= lonRight; lon += step) {
            const x = Math.round(P.xy(latTop, lon)[0]) + 0.5;
            el("line", { class: "grid", x1: x, y1: 0, x2: x, y2: height }, svg);
          }
          const stepLat = nice((latTop - latBottom) / 4 || 1);
          for (let lat = Math.ceil(latBottom / stepLat) * stepLat; lat <= latTop; lat += stepLat) {
            const y = Math.round(P.xy(lat, lonLeft)[1]) + 0.5;
            el("line", { class: "grid", x1: 0, y1: y, x2: width, y2: y }, svg);
          }
          const occupied = new Set();
          for (const v of state.vehicles.values()) for (const id of v.inside || []) occupied.add(id);
          const labels = [];
          for (const r of state.regions) {
            const off = ["failed", "suspended", "expired"].includes(r.status);
            const cls = "region" + (off ? " inactive" : occupied.has(r.id) ? " occupied" : "");
            let top;
            if (r.polygon) {
              let d = "";
              let left = Infinity, right = -Infinity, high = Infinity;
              for (const ring of rings(r)) {
                d += ring.map((p, i) => {
                  const [x, y] = P.xy(p[1], p[0]);
                  left = Math.min(left, x); right = Math.max(right, x); high = Math.min(high, y);
                  return (i ? "L" : "M") + x.toFixed(1) + " " + y.toFixed(1);
                }).join("") + "Z";
              }
              top = [(left + right) / 2, high];
              el("path", { class: cls, d, "fill-rule": "evenodd", "data-region": r.id }, svg);
            } else {
              const [x, y] = P.xy(r.lat, r.lon);
              el("circle", { class: cls, cx: x, cy: y, r: Math.max(r.radius * P.s, 2), "data-region": r.id }, svg);
              top = [x, y - r.radius * P.s];
            }
            labels.push([top[0], top[1] - 6, (r.name || r.id) + (off ? ` (${r.status})` : occupied.has(r.id) ? " (occupied)" : ""), "middle"]);
          }
          for (const v of state.vehicles.values()) {
            if (!v.lastFix) continue;
            const [x, y] = P.xy(v.lastFix.lat, v.lastFix.lon);
            const a = (v.lastFix.accuracy || 0) * P.s;
            if (a > 8) el("circle", { class: "accuracy", cx: x, cy: y, r: a }, svg);
            el("circle", { class: "vehicle", cx: x, cy: y, r: 7, "data-vehicle": v.subject }, svg);
            labels.push([x + 11, y + 4, v.subject, "start"]);
          }
          for (const [x, y, text, anchor] of labels) {
            el("text", { class: "label", x, y, "text-anchor": anchor }, svg).textContent = text;
          }
          // The scale bar, bottom left: a round length of at most 120 pixels.
          const metres = nice(120 / P.s), len = metres * P.s;
          el("path", { class: "scale", d: `M12 ${height - 22}v6h${len}v-6` }, svg);
          el("text", { class: "label", x: 12, y: height - 28 }, svg).textContent =
            metres >= 1000 ? `${metres / 1000} km` : `${metres} m`;
        }
        addEventListener("resize", draw);
        """#

    // The Leaflet renderer. Fixed colours as the SVG's (Docs/map.md); Leaflet's projection (Web Mercator),
    // fitted once to the data's bounds (`bounds()`, which the tests compute too) with a 40-pixel padding and
    // no zoom snapping; then the operator pans and zooms.
    private static let leafletStyle = #"""
        #map.leaflet-container { background: #f5f3ee; font: 12px/1.35 sans-serif; }
        .label { background: none; border: none; }
        .label span { position: absolute; white-space: nowrap; font-size: 12px; color: #111827;
          text-shadow: 0 0 2px #f5f3ee, 0 0 2px #f5f3ee, 0 0 3px #f5f3ee; pointer-events: none; }
        .label.region span { transform: translate(-50%, -100%); margin-top: -4px; }
        .label.vehicle span { transform: translate(11px, -50%); }
        """#
    private static let leafletBody = #"""
        <div id="map"></div>
        """#
    private static let leafletScript = #"""
        const MARGIN = 40, KEEP = 50, R = 6371000; // R: Leaflet's radius of the Earth (L.CRS.Earth.R)
        const state = { regions: [], vehicles: new Map(), events: [], last: null };
        const $status = document.getElementById("status");
        const map = L.map("map", { zoomSnap: 0, zoomDelta: 0.5, wheelPxPerZoomLevel: 120, attributionControl: !!TILES });
        window.geofenceMap = map;
        L.control.scale({ imperial: false, maxWidth: 120, position: "bottomleft" }).addTo(map);
        // The graticule in a pane of its own, under the regions and vehicles (the overlay pane, 400).
        map.createPane("graticule").style.zIndex = 350;
        const grid = L.layerGroup().addTo(map), drawn = L.layerGroup().addTo(map);
        let fitted = false, tiled = !!TILES;
        // Tiles only when the operator named a server; where they cannot be had (offline), the graticule.
        if (TILES) {
          L.tileLayer(TILES.url, { attribution: TILES.attribution, maxZoom: 19 })
            .on("tileerror", () => { if (tiled) { tiled = false; graticule(); } })
            .addTo(map);
        }

        function rings(region) {
          const g = region.polygon;
          if (!g) return [];
          if (g.type === "Polygon") return g.coordinates;
          if (g.type === "MultiPolygon") return g.coordinates.flat();
          return [];
        }
        // Leaflet's [lat, lng] of a region's polygon: rings (the first the outside), or polygons of rings.
        function latlngs(region) {
          const g = region.polygon, ring = r => r.map(p => [p[1], p[0]]);
          if (g.type === "MultiPolygon") return g.coordinates.map(poly => poly.map(ring));
          return g.coordinates.map(ring);
        }
        const degrees = metres => metres / R * 180 / Math.PI;
        const finite = x => typeof x === "number" && Number.isFinite(x);

        // The data's bounds: region centres with their radius, polygon vertices, vehicles' fixes.
        function bounds() {
          let s = Infinity, w = Infinity, n = -Infinity, e = -Infinity;
          const add = (lat, lon, metres) => {
            if (!finite(lat) || !finite(lon)) return;
            const dlat = degrees(metres || 0), dlon = dlat / Math.max(Math.cos(lat * Math.PI / 180), 1e-6);
            s = Math.min(s, lat - dlat); n = Math.max(n, lat + dlat);
            w = Math.min(w, lon - dlon); e = Math.max(e, lon + dlon);
          };
          for (const r of state.regions) {
            if (r.polygon) for (const ring of rings(r)) for (const p of ring) add(p[1], p[0], 0);
            else add(r.lat, r.lon, r.radius);
          }
          for (const v of state.vehicles.values()) if (v.lastFix) add(v.lastFix.lat, v.lastFix.lon, 0);
          if (s > n) return null;
          // At least 100 m each way.
          const mlat = (s + n) / 2, mlon = (w + e) / 2, half = degrees(50);
          const halfLon = half / Math.max(Math.cos(mlat * Math.PI / 180), 1e-6);
          return L.latLngBounds([Math.min(s, mlat - half), Math.min(w, mlon - halfLon)],
                                [Math.max(n, mlat + half), Math.max(e, mlon + halfLon)]);
        }

        // A round number of at most `x`: 1, 2 or 5 times a power of ten.
        function nice(x) {
          const p = Math.pow(10, Math.floor(Math.log10(x)));
          return [5, 2, 1].map(m => m * p).find(v => v <= x) || p;
        }

        // The graticule, without tiles: lines of whole steps of latitude and longitude over what is shown.
        function graticule() {
          grid.clearLayers();
          if (tiled || !fitted) return;
          const shown = map.getBounds(), b = shown.pad(0.5);
          const style = { color: "#e2ded4", weight: 1, opacity: 1, interactive: false, pane: "graticule" };
          const step = nice((shown.getEast() - shown.getWest()) / 4 || 1);
          const stepLat = nice((shown.getNorth() - shown.getSouth()) / 4 || 1);
          for (let lon = Math.ceil(b.getWest() / step) * step; lon <= b.getEast(); lon += step) {
            L.polyline([[b.getSouth(), lon], [b.getNorth(), lon]], style).addTo(grid);
          }
          for (let lat = Math.ceil(b.getSouth() / stepLat) * stepLat; lat <= b.getNorth(); lat += stepLat) {
            L.polyline([[lat, b.getWest()], [lat, b.getEast()]], style).addTo(grid);
          }
        }
        map.on("moveend zoomend resize", graticule);

        const escape = text => String(text).replace(/[&<>"']/g, c => "&#" + c.charCodeAt(0) + ";");
        function label(latlng, text, kind) {
          return L.marker(latlng, {
            icon: L.divIcon({ className: "label " + kind, html: "<span>" + escape(text) + "</span>", iconSize: null }),
            interactive: false, keyboard: false,
          });
        }

        function draw() {
          if (!fitted) {
            const b = bounds();
            if (!b) { map.setView([0, 0], 1); return; }
            fitted = true;
            map.fitBounds(b, { padding: [MARGIN, MARGIN], animate: false });
            graticule();
          }
          drawn.clearLayers();
          const occupied = new Set();
          for (const v of state.vehicles.values()) for (const id of v.inside || []) occupied.add(id);
          for (const r of state.regions) {
            const off = ["failed", "suspended", "expired"].includes(r.status);
            const colour = off ? "#6b7280" : occupied.has(r.id) ? "#16a34a" : "#2563eb";
            const style = {
              color: colour, weight: 2, fillColor: off ? "#9ca3af" : colour, fillOpacity: 0.25,
              dashArray: off ? "6 4" : null, className: "region",
            };
            let top;
            if (r.polygon) {
              const layer = L.polygon(latlngs(r), style).addTo(drawn);
              const b = layer.getBounds();
              top = [b.getNorth(), (b.getWest() + b.getEast()) / 2];
            } else {
              if (!finite(r.lat) || !finite(r.lon) || !finite(r.radius)) continue;
              L.circle([r.lat, r.lon], Object.assign({ radius: r.radius }, style)).addTo(drawn);
              top = [r.lat + degrees(r.radius), r.lon];
            }
            const text = (r.name || r.id) + (off ? ` (${r.status})` : occupied.has(r.id) ? " (occupied)" : "");
            label(top, text, "region").addTo(drawn);
          }
          for (const v of state.vehicles.values()) {
            const f = v.lastFix;
            if (!f || !finite(f.lat) || !finite(f.lon)) continue;
            if (finite(f.accuracy) && f.accuracy > 0) {
              L.circle([f.lat, f.lon], { radius: f.accuracy, stroke: false, fillColor: "#dc2626", fillOpacity: 0.12, interactive: false }).addTo(drawn);
            }
            L.circleMarker([f.lat, f.lon], { radius: 7, color: "#ffffff", weight: 2, fillColor: "#dc2626", fillOpacity: 1, className: "vehicle" })
              .bindPopup(escape(v.subject) + "<br>" + escape(v.lastFixTime || ""))
              .addTo(drawn);
            label([f.lat, f.lon], v.subject, "vehicle").addTo(drawn);
          }
        }
        """#
}
