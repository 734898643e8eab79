/// `GET /debug/magicsock`: the node, its UDP ports and advertised endpoints, the relay
/// connections, and each peer with its current path (DERP or `ip:port`), the last pong's
/// latency and its candidate addresses.
enum MagicsockPage {
    static func html(_ status: TailnetStatus, debugLogging: Bool = false) -> String {
        var page = "<!DOCTYPE html>\n<html><head><title>magicsock</title></head><body>\n<h1>magicsock</h1>\n"
        page += "<ul>\n"
        page += item("node key", status.nodeKey ?? "")
        page += item("disco key", status.discoKey ?? "")
        page += item("addresses", (status.addresses ?? []).joined(separator: ", "))
        page += item("home region", status.homeRegion.map { "\($0)" } ?? "none")
        page += item("debug logging", debugLogging ? "on" : "off")
        page += item("tunnel connections", status.tunnelConnections.map { "\($0)" } ?? "0")
        page += item("direct connections", status.directBlocked == true ? "blocked (DERP only)" : "allowed")
        let ports = (status.udpPorts ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
        page += item("UDP ports", ports.isEmpty ? "none" : ports.joined(separator: ", "))
        page += item("endpoints", (status.endpoints ?? []).joined(separator: ", "))
        page += "</ul>\n<h2>DERP</h2>\n<table border=\"1\"><tr><th>region</th><th>state</th><th>transport</th><th>connects</th><th>reconnects</th><th>last error</th></tr>\n"
        for relay in status.relays ?? [] {
            page += row(["\(relay.region)", relay.state, relay.transport ?? "", "\(relay.connects)", "\(relay.reconnects)", relay.lastError ?? ""])
        }
        page += "</table>\n<h2>Peers</h2>\n<table border=\"1\"><tr><th>node key</th><th>home region</th><th>last handshake</th><th>received</th><th>sent</th><th>path</th><th>last pong</th><th>candidates</th></tr>\n"
        for peer in status.peers ?? [] {
            let handshake = peer.lastHandshakeSecondsAgo.map { "\(Int($0)) s ago" } ?? "never"
            var path = peer.path ?? "derp"
            if path != "derp" { path += peer.directTrusted == true ? " (trusted)" : " (and DERP)" }
            let pong = peer.lastPongMilliseconds.map { "\((($0 * 100).rounded() / 100)) ms" } ?? ""
            page += row([
                peer.nodeKey, peer.homeRegion.map { "\($0)" } ?? "", handshake, "\(peer.receivedBytes)", "\(peer.sentBytes)",
                path, pong, (peer.candidates ?? []).joined(separator: " "),
            ])
        }
        return page + "</table>\n</body></html>\n"
    }

    static func item(_ name: String, _ value: String) -> String {
        "<li>" + escape(name) + ": <code>" + escape(value) + "</code></li>\n"
    }

    static func row(_ cells: [String]) -> String {
        "<tr>" + cells.map { "<td>" + escape($0) + "</td>" }.joined() + "</tr>\n"
    }

    /// HTML text: `&`, `<`, `>`, `"` and `'` escaped (relay errors are outside text).
    static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&#34;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }

    /// Go's `strconv.ParseBool`.
    static func goBool(_ text: String) -> Bool? {
        switch text {
        case "1", "t", "T", "TRUE", "true", "True": true
        case "0", "f", "F", "FALSE", "false", "False": false
        default: nil
        }
    }
}
