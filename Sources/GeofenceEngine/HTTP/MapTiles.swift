import Foundation

/// A tile server the operator opts into for the map (`geofence map --tiles`, `geofence run --map-tiles`):
/// Leaflet's URL template, such as `https://tile.openstreetmap.org/{z}/{x}/{y}.png`. Without one, the map
/// fetches nothing. With one, the page's Content-Security-Policy lets images come from that server only.
package struct MapTiles: Sendable, Equatable {
    /// Leaflet's URL template (`{z}`, `{x}`, `{y}`, optionally `{s}` in the host and `{r}`).
    package let template: String
    /// The CSP source of the tile server: its scheme and host (`{s}.` as `*.`), and port if given.
    package let source: String
    /// What the page credits the tiles to.
    package let attribution: String

    package struct Invalid: Error, CustomStringConvertible {
        package let description: String
    }

    package init(_ template: String) throws(Invalid) {
        guard template.count <= 2000 else { throw Invalid(description: "the URL template is too long") }
        let scheme: String
        if template.hasPrefix("https://") {
            scheme = "https://"
        } else if template.hasPrefix("http://") {
            scheme = "http://"
        } else {
            throw Invalid(description: "\"\(template)\" is not an http:// or https:// URL template")
        }
        let forbidden = CharacterSet.whitespacesAndNewlines.union(.controlCharacters)
            .union(CharacterSet(charactersIn: "\"'<>;,\\`"))
        guard template.unicodeScalars.allSatisfy({ $0.isASCII && !forbidden.contains($0) }) else {
            throw Invalid(description: "\"\(template)\" has a character a URL template cannot have")
        }
        for placeholder in ["{z}", "{x}", "{y}"] where !template.contains(placeholder) {
            throw Invalid(
                description: "\"\(template)\" has no \(placeholder) (Leaflet's template: .../{z}/{x}/{y}.png)")
        }
        let rest = template.dropFirst(scheme.count)
        let authority = String(rest.prefix { $0 != "/" })
        var host = authority
        if host.hasPrefix("{s}.") { host = "*." + host.dropFirst(4) }
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:*")
        guard !host.isEmpty, host.unicodeScalars.allSatisfy({ allowed.contains($0) }),
            !host.dropFirst().contains("*"), rest.count > authority.count
        else {
            throw Invalid(description: "\"\(template)\" has no plain host (letters, digits, dots, a port; {s}. first)")
        }
        self.template = template
        source = scheme + host
        let name = host.split(separator: ":").first.map(String.init) ?? host
        attribution =
            name == "openstreetmap.org" || name.hasSuffix(".openstreetmap.org")
            ? "© OpenStreetMap contributors" : "Tiles: \(name.replacingOccurrences(of: "*.", with: ""))"
    }
}
