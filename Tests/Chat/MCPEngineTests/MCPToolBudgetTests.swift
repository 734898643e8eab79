import AgentCore
import AgentTestSupport
import Foundation
import Testing

@testable import MCPEngine

/// The bounds on what a server's tool listing may make the agent hold: each
/// description 8 KiB, a server's descriptions 256 KiB and its reduced schemas 1 MiB, the
/// catalog's descriptions 4 MiB; against `Servers/huge_tools.py`, which lists pages of tools
/// with descriptions, schemas and names as large as asked. Serialized: a test moves up to
/// 30 MiB through a pipe.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct MCPToolBudgetTests {
    static let mebibyte = 1 << 20

    static func descriptionBytes(_ tools: [ContextTool]) -> Int { tools.reduce(0) { $0 + $1.description.utf8.count } }

    static func huge(_ args: [String]) -> [String: Any] {
        ["command": "python3", "args": ["\(MCPTestServers.directory)/huge_tools.py"] + args]
    }

    /// 2 pages of 15 tools with 1 MiB descriptions (30 MiB): each description is cut to
    /// 8 KiB as its page is read; every tool is kept.
    @Test func aListingKeepsAtMost8KiBADescription() async throws {
        let session = try await MCPTestServers.connect(
            "huge_tools.py", ["--pages", "2", "--description-bytes", "\(Self.mebibyte)"],
            timeouts: .init(list: .seconds(120)))
        let tools = try await session.listTools()
        await session.close()
        #expect(tools.count == 30)
        #expect(tools.allSatisfy { $0.description.utf8.count <= MCPToolBudget.maxDescriptionBytes })
        #expect(Self.descriptionBytes(tools) <= MCPToolBudget.maxServerDescriptionBytes, "\(Self.descriptionBytes(tools))")
        // Cut at a character ("x" then 2-byte "é") with the marker.
        let first = try #require(tools.first)
        #expect(first.description.hasPrefix("xéé") && first.description.hasSuffix(MCPToolBudget.cutMarker))
        #expect(first.description.utf8.count > MCPToolBudget.maxDescriptionBytes - 8)
    }

    /// The engine holds a hostile server's descriptions within the server's cap (60 tools with
    /// 64 KiB descriptions: 32 get 8 KiB, the rest nothing), publishes a catalog within its
    /// cap, leaves out tools whose names or schemas are too large, and says so in the status row.
    @Test func theEngineHoldsAndPublishesWithinTheCapsAndSaysWhatIsCut() async throws {
        let h = try MCPServerManagerTests.Harness(
            servers: [
                "descriptions": Self.huge(["--pages", "4", "--description-bytes", "\(64 << 10)"]),
                "schemas": Self.huge(["--pages", "2", "--schema-bytes", "60000", "--long-names", "1"]),
            ],
            timeouts: .init(list: .seconds(120)))
        h.start()
        #expect(await eventually(timeout: .seconds(120)) { h.entry("descriptions")?.connected == true && h.entry("schemas")?.connected == true })
        let held = h.manager.serverTools
        let descriptions = try #require(held["descriptions"])
        #expect(descriptions.count == 60)
        #expect(Self.descriptionBytes(descriptions) <= MCPToolBudget.maxServerDescriptionBytes, "\(Self.descriptionBytes(descriptions))")
        // The server's budget spent, the last ones are empty, and still listed (callable).
        #expect(descriptions.first { $0.name == "t3_14" }?.description == "")
        #expect(descriptions.first { $0.name == "t0_0" }?.description.utf8.count ?? 0 > MCPToolBudget.maxDescriptionBytes - 8)
        let catalogBytes = h.catalog.entries.reduce(0) { $0 + Self.descriptionBytes($1.tools) }
        #expect(catalogBytes <= MCPToolBudget.maxCatalogDescriptionBytes)
        #expect(h.server("descriptions")?.descriptionsCut == 60)
        #expect(h.server("descriptions")?.toolsLeftOut == 0)

        // 30 tools of about 60 KB schemas: the long name is left out, then those past 1 MiB.
        let schemas = try #require(held["schemas"])
        let schemaBytes = schemas.reduce(0) { $0 + ($1.inputSchema?.encoded.count ?? 0) }
        #expect(schemaBytes <= MCPToolBudget.maxServerSchemaBytes && schemas.count >= 16, "\(schemaBytes) \(schemas.count)")
        #expect(schemas.allSatisfy { $0.name.utf8.count <= MCPToolBudget.maxNameBytes })
        #expect(h.server("schemas")?.toolsLeftOut == 30 - schemas.count)
        #expect(h.server("schemas")?.toolCount == schemas.count)

        // The row says it over the API, and not for a server with nothing cut.
        let row = String(decoding: MCPServerManager.json(MCPServersJSON(h.manager.servers, tools: nil)), as: UTF8.self)
        #expect(row.contains(#""descriptions_cut":60"#), "\(row)")
        #expect(row.contains(#""tools_left_out":\#(30 - schemas.count)"#), "\(row)")
        #expect(!row.contains(#""descriptions_cut":0"#) && !row.contains(#""tools_left_out":0"#))
        await h.stop()
    }

    @Test func aDescriptionIsCutAtACharacterBoundaryWithinItsRoom() {
        let text = "x" + String(repeating: "é", count: 10_000)
        let cut = MCPToolBudget.cut(text, to: 100)
        #expect(cut.utf8.count <= 100 && cut.utf8.count >= 99)
        #expect(cut.hasSuffix(MCPToolBudget.cutMarker) && cut.hasPrefix("xé"))
        #expect(MCPToolBudget.cut("short", to: 100) == "short")
        #expect(MCPToolBudget.cut(text, to: MCPToolBudget.cutMarker.utf8.count) == "")
        #expect(MCPToolBudget.cut(text, to: 0) == "")
    }

    /// Past the server's 256 KiB, later descriptions get what remains, then nothing; tools
    /// whose schema is over 64 KiB or whose name is over 1 KiB are left out and counted.
    @Test func aServersBudgetCutsLaterDescriptionsAndLeavesOutLargeTools() throws {
        var budget = MCPToolBudget()
        let long = String(repeating: "d", count: MCPToolBudget.maxDescriptionBytes * 2)
        var kept: [MCPTool] = []
        for index in 0..<40 {
            if let tool = budget.admit(name: "t\(index)", description: long, schema: nil) { kept.append(tool) }
        }
        #expect(kept.count == 40)
        #expect(Self.descriptionBytes(kept) <= MCPToolBudget.maxServerDescriptionBytes)
        #expect(kept[31].description.utf8.count == MCPToolBudget.maxDescriptionBytes)
        #expect(kept[32].description.isEmpty)
        #expect(budget.cuts.cutAtListing == Array(repeating: true, count: 40))
        #expect(budget.admit(name: "short", description: "", schema: nil)?.description == "")
        #expect(budget.cuts.cutAtListing.last == false)

        let big = try JSONValue.parseWhole(Array(#"{"type":"object","properties":{"p":{"description":"\#(String(repeating: "s", count: 70_000))"}}}"#.utf8))
        #expect(budget.admit(name: "big", description: "", schema: big) == nil)
        #expect(budget.admit(name: String(repeating: "n", count: 2000), description: "", schema: nil) == nil)
        #expect(budget.cuts.toolsLeftOut == 2)
        #expect(budget.cuts.leftOutNames.first == "big")
        let summary = try #require(budget.cuts.summary)
        #expect(summary.contains("40 descriptions cut") && summary.contains("1 tools left out: input schema over 65536 bytes"), "\(summary)")
    }

    /// The catalog's 4 MiB go to servers in name order; a description the listing already
    /// cut is not counted again.
    @Test func theCatalogsBudgetGoesToServersInNameOrder() {
        let description = String(repeating: "d", count: 8 << 10)
        // 20 servers of 32 tools with 8 KiB descriptions: 256 KiB each, 5 MiB in all.
        var entries = (0..<20).map { server in
            MCPCatalogEntry(
                name: String(format: "s%02d", server), connected: true,
                tools: (0..<32).map { ContextTool(name: "t\($0)", description: description) })
        }
        entries.insert(MCPCatalogEntry(name: "down", connected: false, error: "x"), at: 0)
        let cut = MCPToolBudget.fitCatalog(&entries) { name in name == "s16" ? [true, true] : [] }
        #expect(entries.reduce(0) { $0 + Self.descriptionBytes($1.tools) } <= MCPToolBudget.maxCatalogDescriptionBytes)
        #expect(entries.first { $0.name == "s15" }?.tools.allSatisfy { $0.description == description } == true)
        #expect(entries.first { $0.name == "s16" }?.tools.allSatisfy { $0.description.isEmpty } == true)
        #expect(cut["s15"] == nil)
        #expect(cut["s16"] == 30)
        #expect(cut["s19"] == 32)
    }
}
