import AgentCore
import AgentHTTP
import AgentTestSupport
import Foundation
import Logging
@testable import Tailnet
import Testing

/// The tailnet's diagnostics routes on an agent without a tailnet (standalone), and the
/// netcheck report's rules on their own.
@Suite struct TailnetDiagnosticsTests {
    @Test func withoutATailnetNetcheckHasNoNetInfoAndMagicsockSaysSo() async throws {
        let module = TailnetModule(
            configuration: TailnetOptions.Configuration(enabled: true), accessURL: nil, context: .forTests(),
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        try await withAgentServer([HTTPMount(module.diagnostics, at: "/")]) { port in
            let client = RawHTTPClient(port: port)
            let netcheck = try await client.request("GET", "/api/v0/netcheck")
            #expect(netcheck.status == 200)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(netcheck.body)) as? [String: Any])
            #expect(object["net_info"] is NSNull || object["net_info"] == nil, "\(object)")
            #expect(object["dismissed"] as? Bool == false)
            let interfaces = try #require((object["interfaces"] as? [String: Any])?["interfaces"] as? [[String: Any]])
            let loopback = interfaces.first { $0["name"] as? String == "lo" }
            #expect((loopback?["addresses"] as? [String])?.contains("127.0.0.1/8") == true, "\(interfaces)")

            let page = try await client.request("GET", "/debug/magicsock")
            #expect(page.status == 404 && page.bodyText.contains("There is no tailnet."), "\(page)")
            let bad = try await client.request("GET", "/debug/magicsock/debug-logging/maybe")
            #expect(bad.status == 400 && bad.bodyText.contains(#"invalid state \"maybe\", must be a boolean"#), "\(bad)")
            let good = try await client.request("GET", "/debug/magicsock/debug-logging/T")
            #expect(good.status == 200 && good.bodyText == "updated magicsock debug logging to true", "\(good)")
        }
    }

    @Test func netcheckWarnsWhenTheHomeRelayIsDownOrAnMTUIsSmall() {
        let interfaces = [NetcheckReport.Interface(name: "eth0", mtu: 1500, addresses: ["10.0.0.2/24"])]
        let healthy = NetcheckReport(homeRegion: 1, homeConnected: true, interfaces: interfaces)
        #expect(healthy.severity == "ok" && healthy.warnings.isEmpty && healthy.netInfo?.preferredDERP == 1)
        let down = NetcheckReport(homeRegion: 1, homeConnected: false, interfaces: interfaces)
        #expect(down.severity == "warning" && down.warnings.map(\.code) == ["EDERP01"])
        let small = NetcheckReport(
            homeRegion: 1, homeConnected: true, interfaces: [NetcheckReport.Interface(name: "wg0", mtu: 1280, addresses: [])])
        #expect(small.interfaces.severity == "warning" && small.warnings.map(\.code) == ["EIF01"])
        #expect(MagicsockPage.escape("<a href='x'>&\"") == "&lt;a href=&#39;x&#39;&gt;&amp;&#34;")
    }
}
