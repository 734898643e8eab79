import AgentCore
import AgentHTTP
import AgentLogging
import AgentTestSupport
@testable import Diagnostics
import Foundation
import Testing

/// The listening-port scan against servers a real child process opens on IPv4, IPv6 only
/// and dual-stack, and the `/proc/net/tcp` parser on its own.
@Suite(.timeLimit(.minutes(2)))
struct ListeningPortsTests {
    @Test func theParserKeepsListenRowsOnly() {
        let table = """
              sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
               0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
               1: 0100007F:A2C4 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1
               2: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 77 1
               3: garbage
               4: 0100007F:XYZ 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5
               5: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 99999999999999999999
            """
        let found = ProcNetTCP.listeners(Array(table.utf8))
        #expect(found == [ProcNetTCP.Listener(port: 8080, inode: 4242), ProcNetTCP.Listener(port: 80, inode: 77)])
    }

    @Test func serversOnIPv4IPv6AndDualStackAreListedWithTheirProcess() async throws {
        let script = """
            import socket, sys
            def listen(family, host, v6only=None):
                s = socket.socket(family, socket.SOCK_STREAM)
                if v6only is not None:
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, v6only)
                s.bind((host, 0))
                s.listen()
                return s
            a = listen(socket.AF_INET, '127.0.0.1')
            b = listen(socket.AF_INET6, '::1', 1)
            c = listen(socket.AF_INET6, '::', 0)
            print(a.getsockname()[1], b.getsockname()[1], c.getsockname()[1], flush=True)
            sys.stdin.read()
            """
        let child = try #require(ChildProgram.start(["/usr/bin/python3", "-c", script]))
        let line = await readLine(child.stdout)
        let ports = line.split(separator: " ").compactMap { UInt16($0) }
        try #require(ports.count == 3, "child said \(line)")

        let scanner = ListeningPortScanner()
        let listed = try scanner.scan()
        // Each port is listed; the IPv4 one is python's for sure (a port number is listed
        // once, the IPv4 table first, so a concurrent test's IPv4 listener on the same number
        // as an IPv6 one of python's would be named instead).
        for port in ports {
            let entry = listed.first { $0.port == port }
            #expect(entry?.network == "tcp", "port \(port) in \(listed)")
        }
        #expect(listed.first { $0.port == ports[0] }?.processName == "python3", "\(listed)")
        #expect(ports.dropFirst().contains { port in listed.first { $0.port == port }?.processName == "python3" }, "\(listed)")
        #expect(listed.map(\.port) == listed.map(\.port).sorted())
        #expect(Set(listed.map(\.port)).count == listed.count, "each port once")

        // Ignored ports stay out; once the child is gone its ports are too.
        let ignoring = try ListeningPortScanner(ignored: [ports[0]]).scan()
        #expect(!ignoring.contains { $0.port == ports[0] })
        await onThread { child.kill() }
        let after = try scanner.scan()
        for port in ports { #expect(!after.contains { $0.port == port && $0.processName == "python3" }, "port \(port) still listed") }
    }

    @Test func theRouteAnswersTheReferenceShape() async throws {
        let module = DiagnosticsModule(context: .forTests(), recentLogs: RecentLogs())
        try await withAgentServer([HTTPMount(module, at: "/")]) { port in
            let client = RawHTTPClient(port: port)
            let response = try await client.request("GET", "/api/v0/listening-ports")
            #expect(response.status == 200)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
            let entries = try #require(object["ports"] as? [[String: Any]])
            // The test server's own port is a listener of this process.
            let own = entries.first { ($0["port"] as? Int) == port }
            #expect(own?["network"] as? String == "tcp")
            #expect(own?["process_name"] is String)
        }
    }

    @Test func theCacheAnswersForASecondThenScansAgain() async throws {
        let child = try #require(
            ChildProgram.start([
                "/usr/bin/python3", "-c",
                "import socket, sys\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\nprint(s.getsockname()[1], flush=True)\nsys.stdin.read()",
            ]))
        let port = try #require(UInt16(await readLine(child.stdout)))
        let cache = ListeningPortCache(scanner: ListeningPortScanner())
        let start = ContinuousClock.now
        #expect(try cache.current(at: start).contains { $0.port == port })
        await onThread { child.kill() }
        #expect(try cache.current(at: start + .milliseconds(500)).contains { $0.port == port }, "cached")
        #expect(try !cache.current(at: start + .milliseconds(1500)).contains { $0.port == port }, "scanned again")
    }

    @Test func helloContainersManifestAndLogs() async throws {
        let logs = RecentLogs()
        logs.append("first line")
        let store = ManifestStore()
        var context = AgentContext.forTests()
        context.manifest = store
        let module = DiagnosticsModule(context: context, recentLogs: logs)
        try await withAgentServer([HTTPMount(module, at: "/")]) { port in
            let client = RawHTTPClient(port: port)
            let hello = try await client.request("GET", "/")
            #expect(hello.status == 200)
            #expect(hello.bodyText == #"{"message":"Hello from the agent!"}"# + "\n")

            for (method, path) in [("GET", "/api/v0/containers"), ("POST", "/api/v0/containers/devcontainers/abc/recreate"), ("DELETE", "/api/v0/containers/devcontainers/abc")] {
                let refused = try await client.request(method, path)
                #expect(refused.status == 403, "\(method) \(path)")
                #expect(refused.bodyText.contains("Dev Container feature not enabled."))
            }

            let none = try await client.request("GET", "/debug/manifest")
            #expect(none.status == 500)
            #expect(none.bodyText.contains("no manifest in-memory"))
            store.publish(AgentManifest(directory: "/work", environment: ["A": "1"], workspaceName: "ws", agentName: "main", ownerName: "alice"))
            let manifest = try await client.request("GET", "/debug/manifest")
            #expect(manifest.status == 200)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(manifest.body)) as? [String: Any])
            #expect(object["agent_name"] as? String == "main")
            #expect(object["owner_name"] as? String == "alice")
            #expect(object["directory"] as? String == "/work")
            #expect((object["environment_variables"] as? [String: String])?["A"] == "1")
            #expect(object["agent_id"] as? String == "00000000-0000-0000-0000-000000000000")

            logs.append("second line")
            let text = try await client.request("GET", "/debug/logs")
            #expect(text.status == 200)
            #expect(text.header("content-type")?.hasPrefix("text/plain") == true)
            #expect(text.bodyText == "first line\nsecond line\n")
        }
    }

    @Test func recentLogsKeepTheNewestWithinTheirBound() {
        let logs = RecentLogs(maxBytes: 100)
        for index in 0..<50 { logs.append("line \(index)") }
        let text = logs.text()
        #expect(text.utf8.count <= 100)
        #expect(text.hasSuffix("line 49\n"))
        #expect(!text.contains("line 1\n"))
        let long = String(repeating: "x", count: RecentLogs.maxLineBytes * 2)
        let wide = RecentLogs()
        wide.append(long)
        #expect(wide.text().utf8.count < RecentLogs.maxLineBytes + 16)
    }

    /// One line from `fd` (bounded: 4 KiB), read on a thread of its own (a blocking read
    /// must not hold one of the test pool's two threads).
    func readLine(_ fd: Int32) async -> String {
        await onThread {
            var bytes: [UInt8] = []
            var byte: UInt8 = 0
            while bytes.count < 4096, read(fd, &byte, 1) == 1, byte != 10 { bytes.append(byte) }
            return String(decoding: bytes, as: UTF8.self)
        }
    }
}
