import AgentCore
import AgentProto
import AgentSocket
import AgentTestSupport
import Testing

/// Unit names are bounded (200 calls with 4 MiB names held 880 MiB).
// Three minutes: its `.ownThreads` test may wait behind other long ones for one of the two threads.
@Suite(.timeLimit(.minutes(3)))
struct UnitNameLimitTests {
    @Test func namesOverTheLimitAreRefusedWithAClearErrorAndStoreNothing() async throws {
        try await withSocketServer { client, _ in
            let atLimit = String(repeating: "u", count: UnitManager.maxNameBytes)
            try await client.syncStart(atLimit)
            #expect(try await client.syncStatus(atLimit).status == "started", "a name of exactly the limit works")
            let long = String(repeating: "x", count: UnitManager.maxNameBytes + 1)
            let huge = String(repeating: "y", count: 64 << 10)
            let expected = "unit name is too long: \(long.utf8.count) bytes (limit \(UnitManager.maxNameBytes))"
            let calls: [(String, @Sendable () async throws -> Void)] = [
                ("start", { try await client.syncStart(long) }),
                ("want", { try await client.syncWant(long, dependsOn: "d") }),
                ("want dependency", { try await client.syncWant("w", dependsOn: long) }),
                ("complete", { try await client.syncComplete(long) }),
                ("ready", { _ = try await client.syncReady(long) }),
                ("status", { _ = try await client.syncStatus(long) }),
                ("wait", { try await client.waitReady(long) }),
            ]
            for (name, call) in calls {
                do {
                    try await call()
                    Issue.record("\(name): a \(long.utf8.count)-byte name was accepted")
                } catch {
                    #expect("\(error)" == expected, "\(name)")
                }
            }
            // The answer names the length, never the name itself.
            for _ in 0..<5 {
                do {
                    try await client.syncWant(huge, dependsOn: huge)
                    Issue.record("a 64 KiB name was accepted")
                } catch {
                    #expect("\(error)" == "unit name is too long: \(64 << 10) bytes (limit \(UnitManager.maxNameBytes))")
                }
            }
            #expect(try await client.syncList().map(\.unit) == [atLimit], "nothing else was stored")
        }
    }

    @Test(.ownThreads) func theManagerChecksNamesAndTheTotalEdgeCount() throws {
        let units = UnitManager()
        let long = String(repeating: "é", count: UnitManager.maxNameBytes / 2 + 1)  // 2 bytes each
        #expect(throws: UnitManager.Failure.self) { try units.register(long) }
        try units.register("a")
        #expect(throws: UnitManager.Failure.self) { try units.addDependency("a", dependsOn: long, required: .completed) }
        #expect(units.list().map(\.unit) == ["a"])
        #expect(units.status("a").dependencies.isEmpty)
        // The whole graph's edges are bounded, not only each unit's.
        var added = 0
        outer: for unit in 0..<(UnitManager.maxEdges / UnitManager.maxEdgesPerUnit + 1) {
            try units.register("u\(unit)")
            for dependency in 0..<UnitManager.maxEdgesPerUnit {
                do {
                    try units.addDependency("u\(unit)", dependsOn: "d\(dependency)", required: .completed)
                    added += 1
                } catch {
                    #expect(error.description == "too many dependencies (limit \(UnitManager.maxEdges) in all)")
                    break outer
                }
            }
        }
        #expect(added == UnitManager.maxEdges)
    }
}
