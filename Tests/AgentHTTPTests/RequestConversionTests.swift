@testable import AgentHTTP
import HTTPTypes
import NIOHTTP1
import NIOHTTPTypesHTTP1
import Testing

/// The agent's head conversion gives what NIO's gives, for every request-target form.
struct RequestConversionTests {
    @Test func matchesNIOConversion() throws {
        let targets = [
            "/", "/healthz", "/api/v0/processes/x/output?wait=true", "/a%20b?q=%2F&x", "//double/slash", "*",
            "http://example.test/path?query=1", "http://example.test", "https://h:8/p", "relative/path", "",
        ]
        let headerSets: [[(String, String)]] = [
            [],
            [("Host", "127.0.0.1:2114"), ("Accept", "*/*")],
            [("host", "a"), ("HOST", "b"), ("Cookie", "a=1; b=2"), ("X-Custom", "v")],
        ]
        for target in targets {
            for headers in headerSets {
                for method in [HTTPMethod.GET, .POST, .RAW(value: "PURGE")] {
                    let head = HTTPRequestHead(version: .http1_1, method: method, uri: target, headers: HTTPHeaders(headers))
                    let ours = try? HTTPRequest(agentHead: head)
                    let nio = try? HTTPRequest(head, secure: false, splitCookie: false)
                    #expect(ours == nio, "\(method) \(target) \(headers)")
                }
            }
        }
    }
}
