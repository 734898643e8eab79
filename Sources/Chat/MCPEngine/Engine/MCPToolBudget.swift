import AgentCore

/// What one listing of a server's tools may keep: each tool is admitted as its page is read
/// (description cut, schema reduced, or the tool left out), so a page's bytes never outlive it.
///
/// Memory: per server at most ``maxServerDescriptionBytes`` of descriptions,
/// ``maxServerSchemaBytes`` of reduced schemas (as compact JSON) and ``MCPLimits/maxTools``
/// names of at most ``maxNameBytes``; the catalog at most ``maxCatalogDescriptionBytes`` of descriptions.
struct MCPToolBudget: Sendable {
    /// One tool's description at most; the rest is cut (at a character boundary, ``cutMarker`` added).
    static let maxDescriptionBytes = 8 << 10
    /// One server's descriptions together at most (the control plane's 256 KiB a pushed
    /// resource): past it, later tools' descriptions are cut to what remains, empty at the end.
    static let maxServerDescriptionBytes = 256 << 10
    /// One server's reduced schemas together at most, as compact JSON (four times what one
    /// pushed resource may carry); a tool whose schema no longer fits is left out.
    static let maxServerSchemaBytes = 1 << 20
    /// A tool name longer than this leaves its tool out (MCP asks for 128 characters at most).
    static let maxNameBytes = 1024
    /// The descriptions of the whole catalog at most (the control plane's 4 MiB a push),
    /// servers in name order; applied when the catalog is published.
    static let maxCatalogDescriptionBytes = 4 << 20
    /// What ends a cut description.
    static let cutMarker = " …(cut)"
    /// Names of left-out tools quoted in the listing's warning.
    static let namesLogged = 5

    /// Why a tool was left out of the catalog (it stays callable by name).
    enum LeftOut: Sendable, CaseIterable {
        case nameTooLong, schemaTooLarge, schemasOverBudget

        var text: String {
            switch self {
            case .nameTooLong: "name over \(MCPToolBudget.maxNameBytes) bytes"
            case .schemaTooLarge: "input schema over \(MCPSchemaReduction.maxSchemaBytes) bytes"
            case .schemasOverBudget: "the server's input schemas over \(MCPToolBudget.maxServerSchemaBytes) bytes"
            }
        }
    }

    private(set) var descriptionBytes = 0
    private(set) var schemaBytes = 0
    private(set) var cuts = MCPToolCuts()

    /// The tool as the catalog keeps it, or nil when it is left out (counted in ``cuts``).
    mutating func admit(name: String, description: String, schema: JSONValue?) -> MCPTool? {
        guard name.utf8.count <= Self.maxNameBytes else { return leaveOut(name, .nameTooLong) }
        let reduced = MCPSchemaReduction.reduce(schema)
        let size = reduced?.encoded.count ?? 0
        guard size <= MCPSchemaReduction.maxSchemaBytes else { return leaveOut(name, .schemaTooLarge) }
        guard schemaBytes + size <= Self.maxServerSchemaBytes else { return leaveOut(name, .schemasOverBudget) }
        schemaBytes += size
        let room = min(Self.maxDescriptionBytes, Self.maxServerDescriptionBytes - descriptionBytes)
        let kept = Self.cut(description, to: room)
        descriptionBytes += kept.utf8.count
        cuts.cutAtListing.append(kept.utf8.count != description.utf8.count)
        return MCPTool(name: name, description: kept, inputSchema: reduced)
    }

    private mutating func leaveOut(_ name: String, _ reason: LeftOut) -> MCPTool? {
        cuts.leftOut[reason, default: 0] += 1
        if cuts.leftOutNames.count < Self.namesLogged {
            cuts.leftOutNames.append(ContextRedactor.cut(name, bytes: 64, suffix: "…"))
        }
        return nil
    }

    /// `text` within `limit` bytes: whole when it fits, else cut at a character boundary
    /// with ``cutMarker``, empty when not even the marker and a byte fit.
    static func cut(_ text: String, to limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        guard limit > cutMarker.utf8.count else { return "" }
        return ContextRedactor.cut(text, bytes: limit, suffix: cutMarker)
    }

    /// Cuts the catalog's descriptions to ``maxCatalogDescriptionBytes`` in all, servers in
    /// the given (name) order and each one's tools in order; returns per server how many
    /// descriptions this cut that its listing had not (`cutAtListing` flags its tools).
    static func fitCatalog(
        _ entries: inout [MCPCatalogEntry], cutAtListing: (String) -> [Bool], limit: Int = maxCatalogDescriptionBytes
    ) -> [String: Int] {
        var remaining = limit
        var cut: [String: Int] = [:]
        for index in entries.indices where entries[index].connected {
            let flags = cutAtListing(entries[index].name)
            for tool in entries[index].tools.indices {
                let description = entries[index].tools[tool].description
                let kept = Self.cut(description, to: remaining)
                remaining -= kept.utf8.count
                guard kept.utf8.count != description.utf8.count else { continue }
                entries[index].tools[tool].description = kept
                if !(flags.indices.contains(tool) && flags[tool]) { cut[entries[index].name, default: 0] += 1 }
            }
        }
        return cut
    }
}

/// What the caps cut from one server's listing, for its status row and its warning.
struct MCPToolCuts: Sendable, Equatable {
    /// Per kept tool, in the catalog's (name) order: whether the listing cut its description.
    var cutAtListing: [Bool] = []
    /// Tools left out, by why.
    var leftOut: [MCPToolBudget.LeftOut: Int] = [:]
    /// The first few left out, for the warning.
    var leftOutNames: [String] = []
    /// Descriptions the catalog's bound cut that the listing had not (set at each publish).
    var cutInCatalog = 0

    var descriptionsCut: Int { cutAtListing.count { $0 } + cutInCatalog }
    var toolsLeftOut: Int { leftOut.values.reduce(0, +) }

    /// The listing's cuts for a warning; nil when nothing was cut.
    var summary: String? {
        let listingCut = cutAtListing.count { $0 }
        guard listingCut > 0 || toolsLeftOut > 0 else { return nil }
        var parts: [String] = []
        if listingCut > 0 {
            parts.append(
                "\(listingCut) descriptions cut (\(MCPToolBudget.maxDescriptionBytes) bytes a tool, \(MCPToolBudget.maxServerDescriptionBytes) a server)")
        }
        for reason in MCPToolBudget.LeftOut.allCases {
            if let count = leftOut[reason] { parts.append("\(count) tools left out: \(reason.text)") }
        }
        if !leftOutNames.isEmpty { parts.append("first left out: \(leftOutNames.map(goQuote).joined(separator: ", "))") }
        return parts.joined(separator: "; ")
    }
}
