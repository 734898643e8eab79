import AgentCore
import AgentProto
import AgentSocket
import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The reference's behaviour, through a real unix socket and real dRPC frames.
@Suite(.timeLimit(.minutes(3)))
struct AgentSocketConformanceTests {
    // 1, 2: lifecycle.
    @Test func socketLifecycle() async throws {
        let directory = try socketDirectory()
        let path = directory + "/agent.sock"
        // A stale socket file (nobody listens) is taken over.
        makeStaleSocket(path)
        #expect(FileManager.default.fileExists(atPath: path), "a stale socket file exists")

        try await withSocketServer(path: path) { client, server in
            #expect(server.creationFailure == nil)
            try await client.ping()
            var info = stat()
            #expect(lstat(path, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o600, "mode 0600")
            #expect(info.st_mode & S_IFMT == S_IFSOCK)
            // A second server on the live path fails with `create socket`, and leaves it alone.
            try await withSocketServer(path: path) { _, second in
                #expect(second.creationFailure?.contains("create socket") == true)
                #expect(second.creationFailure?.contains("is not available") == true)
            }
            try await client.ping()
        }
        #expect(!FileManager.default.fileExists(atPath: path), "removed at shutdown")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(leftovers.isEmpty, "no staging directory left: \(leftovers)")
    }

    @Test func aFileOfAnotherKindIsReplacedAndAReplacedSocketIsNotRemoved() async throws {
        let path = try socketDirectory() + "/agent.sock"
        _ = FileManager.default.createFile(atPath: path, contents: Data("not a socket".utf8))
        try await withSocketServer(path: path) { client, _ in
            try await client.ping()
            // Someone else replaces the path: at shutdown the agent leaves theirs alone.
            unlink(path)
            _ = FileManager.default.createFile(atPath: path, contents: Data("theirs".utf8))
        }
        #expect(FileManager.default.contents(atPath: path) == Data("theirs".utf8))
    }

    // 3, 4.
    @Test func pingAndStart() async throws {
        try await withSocketServer { client, _ in
            try await client.ping()
            try await client.syncStart("a")
            #expect(try await client.syncStatus("a").status == "started")
            await #expect(throws: AgentSocketClient.Failure.self) { try await client.syncStart("a") }
            do { try await client.syncStart("a") } catch {
                #expect("\(error)" == #"cannot start unit "a": checking status for unit "a": same status already set"#)
            }
            #expect(try await client.syncStatus("a").status == "started")
            try await client.syncComplete("a")
            try await client.syncStart("a")
            #expect(try await client.syncStatus("a").status == "started")
        }
    }

    // 5, 6, 7, 8.
    @Test func wantMakesAUnitWait() async throws {
        try await withSocketServer { client, _ in
            try await client.syncWant("a", dependsOn: "dep")
            do {
                try await client.syncStart("a")
                Issue.record("start succeeded")
            } catch {
                #expect("\(error)" == #"cannot start unit "a": unit not ready"#)
            }
            let status = try await client.syncStatus("a")
            #expect(status.status == "pending" && !status.isReady)
            #expect(status.dependencies.count == 1)
            let dependency = try #require(status.dependencies.first)
            #expect(dependency.unit == "a" && dependency.dependsOn == "dep")
            #expect(dependency.requiredStatus == "completed" && dependency.currentStatus == "" && !dependency.isSatisfied)
            #expect(try await client.syncReady("unregistered"))
            #expect(try await client.syncReady("a") == false)
            try await client.syncStart("dep")
            #expect(try await client.syncReady("a") == false, "started is not completed")
            try await client.syncWant("a", dependsOn: "dep")
            try await client.syncComplete("dep")
            #expect(try await client.syncReady("a"))
            try await client.syncStart("a")
            // A want after the dependent started leaves its status alone.
            try await client.syncWant("a", dependsOn: "late")
            #expect(try await client.syncStatus("a").status == "started")
        }
    }

    // 9, 10, 11.
    @Test func cyclesEmptyNamesAndCompletion() async throws {
        try await withSocketServer { client, _ in
            do {
                try await client.syncWant("self", dependsOn: "self")
                Issue.record("self-dependency accepted")
            } catch {
                #expect("\(error)".contains("cycle detected"))
            }
            try await client.syncWant("A", dependsOn: "B")
            try await client.syncWant("B", dependsOn: "C")
            try await client.syncWant("C", dependsOn: "D")
            do {
                try await client.syncWant("D", dependsOn: "A")
                Issue.record("indirect cycle accepted")
            } catch {
                #expect("\(error)" == "cannot add dependency: adding edge for unit \"D\": failed to add dependency\nadding edge (D -> A): cycle detected")
            }
            try await client.syncWant("A", dependsOn: "B")
            #expect(try await client.syncStatus("A").dependencies.count == 1, "an identical want adds nothing")

            // Each empty name fails with the reference's own text (SyncWant's and SyncStatus's
            // carry the prefixes of the step that refused it).
            let empty: [(String, @Sendable () async throws -> Void)] = [
                ("SyncStart: registering unit \"\": unit name is required", { try await client.syncStart("") }),
                ("cannot complete unit \"\": updating status for unit \"\": unit name is required", { try await client.syncComplete("") }),
                ("cannot check readiness: unit ID cannot be empty: unit name is required", { _ = try await client.syncReady("") }),
                ("cannot add dependency: registering unit \"\": unit name is required", { try await client.syncWant("", dependsOn: "x") }),
                ("cannot add dependency: ", { try await client.syncWant("x", dependsOn: "") }),
                ("cannot check readiness: unit ID cannot be empty: unit name is required", { _ = try await client.syncStatus("") }),
            ]
            for (expected, call) in empty {
                do {
                    try await call()
                    Issue.record("an empty name was accepted")
                } catch {
                    #expect("\(error)".hasPrefix(expected) && "\(error)".hasSuffix("unit name is required"), "\(error)")
                }
            }
            let unknown = try await client.syncStatus("nobody")
            #expect(unknown.status == "" && unknown.isReady && unknown.dependencies.isEmpty)

            do {
                try await client.syncComplete("ghost")
                Issue.record("completed an unregistered unit")
            } catch {
                #expect("\(error)" == #"cannot complete unit "ghost": unit "ghost" must be registered first: unit not found"#)
            }
            try await client.syncWant("pending-one", dependsOn: "x")
            try await client.syncComplete("pending-one")
            do {
                try await client.syncComplete("pending-one")
                Issue.record("completed twice")
            } catch {
                #expect("\(error)".hasSuffix("same status already set"))
            }
        }
    }

    // 12, 13.
    @Test func exactReadinessAndList() async throws {
        try await withSocketServer { client, _ in
            #expect(try await client.syncList().isEmpty)
            try await client.syncStart("a")
            try await client.syncStart("b")
            try await client.syncComplete("b")
            try await client.syncWant("c", dependsOn: "a")
            let units = try await client.syncList().map { "\($0.unit)/\($0.status)/\($0.isReady)" }.sorted()
            #expect(units == ["a/started/true", "b/completed/true", "c/pending/false"])
            try await client.syncWant("d", dependsOn: "b")
            #expect(try await client.syncReady("d"))
            try await client.syncStart("b")
            #expect(try await client.syncReady("d") == false, "re-starting a completed dependency un-readies its dependents")
        }
    }

    // 18.
    @Test func unknownMethodsAndConcurrency() async throws {
        try await withSocketServer { client, server in
            let raw = try #require(LoopbackSocket(unixPath: client.path))
            raw.send(unaryFrames("/coder.agentsocket.v1.AgentSocket/Nope", []))
            raw.send(unaryFrames("/coder.agentsocket.v1.AgentSocket/Ping", [], stream: 2))
            // The agent answers the unknown call with an Error frame and keeps serving.
            var seen: [UInt8] = []
            _ = await eventually {
                let (bytes, _) = await raw.readAll(timeout: .milliseconds(200))
                seen += bytes
                return String(decoding: seen, as: UTF8.self).contains("unknown rpc") && seen.contains(0x0D)
            }
            #expect(String(decoding: seen, as: UTF8.self).contains(#"unknown rpc: "/coder.agentsocket.v1.AgentSocket/Nope""#))
            // Separate connections run in parallel: a waiting client does not hold others up.
            try await client.syncWant("slow", dependsOn: "gate")
            let waiting = Task { try await client.waitReady("slow") }
            for _ in 0..<20 { try await client.ping() }
            try await client.syncStart("gate")
            try await client.syncComplete("gate")
            try await waiting.value
            _ = server
        }
    }
}
