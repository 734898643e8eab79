@testable import AgentProc
import AgentHTTP
import AgentTestSupport
import Foundation
import Testing

/// Bad input on every route gets a clear error, never a crash, and loses nothing.
@Suite(.timeLimit(.minutes(2)))
struct ProcessBadInputTests {
    @Test func emptyBodyIs400EOF() async throws {
        try await withProcessServer { h in
            for path in ["/api/v0/processes/start"] {
                let r = try await h.client.request("POST", path, body: [])
                #expect(r.status == 400)
                #expect(jsonObject(r.body)?["detail"] as? String == "EOF")
            }
            let id = try await h.start("sleep 600")
            let r = try await h.client.request("POST", "/api/v0/processes/\(id)/signal")
            #expect(r.status == 400)
            #expect(jsonObject(r.body)?["message"] as? String == "Request body must be valid JSON.")
            #expect(h.manager.lookup(id, chat: nil)?.isRunning == true)
            _ = try await h.signal(id, #"{"signal":"kill"}"#)
        }
    }

    @Test func wrongTypesAre400WithGoDetails() async throws {
        try await withProcessServer { h in
            let cases: [(String, String)] = [
                (#"{"command":["ls"]}"#, "json: cannot unmarshal array into Go struct field StartProcessRequest.command of type string"),
                (#"{"command":"ls","env":"A=1"}"#, "json: cannot unmarshal string into Go struct field StartProcessRequest.env of type map[string]string"),
                (#"{"command":"ls","env":{"A":1}}"#, "json: cannot unmarshal number into Go struct field StartProcessRequest.env of type string"),
                (#"{"command":"ls","background":1}"#, "json: cannot unmarshal number into Go struct field StartProcessRequest.background of type bool"),
                (#"{"command":"ls","workdir":false}"#, "json: cannot unmarshal bool into Go struct field StartProcessRequest.workdir of type string"),
                ("[]", "json: cannot unmarshal array into Go value of type StartProcessRequest"),
                // A nested field is named by its path from the body.
                (#"{"command":"ls","pty":{"rows":"24","cols":80}}"#, "json: cannot unmarshal string into Go struct field StartProcessRequest.pty.rows of type int"),
            ]
            for (body, detail) in cases {
                let r = try await h.client.request("POST", "/api/v0/processes/start", json: body)
                #expect(r.status == 400, "\(body)")
                #expect(jsonObject(r.body)?["detail"] as? String == detail)
            }
            let sig = try await h.signal("x", #"{"signal":9}"#)
            #expect(jsonObject(sig.body)?["detail"] as? String == "json: cannot unmarshal number into Go struct field SignalProcessRequest.signal of type string")
            #expect(h.manager.count == 0)
        }
    }

    @Test func unknownIDsAre404OnEveryRoute() async throws {
        try await withProcessServer { h in
            for (method, path, body) in [
                ("GET", "/api/v0/processes/ghost/output", nil),
                ("GET", "/api/v0/processes/ghost/output?wait=true", nil),
                ("POST", "/api/v0/processes/ghost/signal", #"{"signal":"terminate"}"#),
                ("GET", "/api/v0/processes/ghost/stream", nil),
            ] as [(String, String, String?)] {
                let r = try await h.client.request(method, path, body: body.map { Array($0.utf8) })
                #expect(r.status == 404, "\(method) \(path)")
                #expect(jsonObject(r.body)?["message"] as? String == #"Process "ghost" not found."#)
            }
            // Go's %q quoting of odd ids.
            let odd = try await h.client.request("GET", "/api/v0/processes/a%22b/output")
            #expect(odd.status == 404)
            #expect(jsonObject(odd.body)?["message"] as? String == #"Process "a\"b" not found."#)
        }
    }

    @Test func oversizedBodyIs413AndStartsNothing() async throws {
        try await withProcessServer { h in
            let big = #"{"command":"echo "# + String(repeating: "x", count: AgentHTTPLimits.maxRequestBody) + #""}"#
            let r = try await h.client.request("POST", "/api/v0/processes/start", json: big)
            #expect(r.status == 413)
            #expect(jsonObject(r.body)?["message"] as? String == "Request body too large.")
            #expect(h.manager.count == 0)
            // A body just under the limit is fine.
            // (Linux caps one environment string at 128 KiB, so spread the padding.)
            let pad = (0..<50).map { i in "\"PAD\(i)\":\"" + String(repeating: "p", count: 10_000) + "\"" }.joined(separator: ",")
            let fits = #"{"command":"true","env":{"# + pad + "}}"
            #expect(fits.utf8.count > 500_000)
            #expect(try await h.client.request("POST", "/api/v0/processes/start", json: fits).status == 200)
        }
    }

    @Test func unknownRoutesAndMethodsAreJSON404() async throws {
        try await withProcessServer { h in
            for (method, path) in [("GET", "/nope"), ("GET", "/api/v0/processes/start"), ("DELETE", "/api/v0/processes/list")] {
                let r = try await h.client.request(method, path)
                #expect(r.status == 404 || r.status == 405, "\(method) \(path)")
                #expect(jsonObject(r.body)?["message"] != nil)
            }
        }
    }

    @Test func malformedHTTPIsRejectedAndServerSurvives() async throws {
        try await withProcessServer { h in
            // Either a 400 or a closed connection; never a hang.
            for junk in ["THIS IS NOT HTTP\r\n\r\n", "GET / HTTP/1.1\r\nBad Header\r\n\r\n", "\u{0}\u{1}\u{2}\r\n\r\n"] {
                let response = try? await h.client.raw(Array(junk.utf8), timeout: .seconds(10))
                #expect(response == nil || response!.status == 400, "\(junk)")
            }
            let hugeHeader = try? await h.client.raw(Array("GET /healthz HTTP/1.1\r\nX-Big: \(String(repeating: "h", count: 100_000))\r\n\r\n".utf8))
            #expect(hugeHeader == nil || hugeHeader!.status >= 400)
            let health = try await h.client.request("GET", "/healthz")
            #expect(health.status == 200)
        }
    }

    @Test func clientVanishingDuringWaitReleasesTheWaiter() async throws {
        try await withProcessServer { h in
            let id = try await h.start("sleep 60")
            let process = try #require(h.manager.lookup(id, chat: nil))
            let request = "GET /api/v0/processes/\(id)/output?wait=true HTTP/1.1\r\nHost: x\r\n\r\n"
            try await h.client.sendAndVanish(Array(request.utf8), after: .milliseconds(300))
            #expect(await eventually { process.exitWaiterCount == 0 })
            #expect(process.isRunning)
            #expect(try await h.client.request("GET", "/healthz").status == 200)
            _ = try await h.signal(id, #"{"signal":"kill"}"#)
        }
    }

    @Test func clientVanishingMidBodyStartsNothing() async throws {
        try await withProcessServer { h in
            let partial = "POST /api/v0/processes/start HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n{\"command\":\"touch /tmp/never"
            try await h.client.sendAndVanish(Array(partial.utf8), after: .milliseconds(100))
            try await Task.sleep(for: .milliseconds(200))
            #expect(h.manager.count == 0)
            #expect(try await h.client.request("GET", "/healthz").status == 200)
        }
    }

    @Test func keepAliveConnectionServesManyRequests() async throws {
        try await withProcessServer { h in
            var raw = ""
            for _ in 0..<5 { raw += "GET /api/v0/processes/list HTTP/1.1\r\nHost: x\r\n\r\n" }
            raw += "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            let r = try await h.client.raw(Array(raw.utf8))
            #expect(r.status == 200)
            #expect(r.bodyText.components(separatedBy: "HTTP/1.1 200").count == 6, "\(r.bodyText)")
        }
    }
}
