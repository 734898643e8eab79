import AgentCore
import ArgumentParser
import HostStats

/// A `stat` command's failure, printed as the reference words it (one line on stderr, exit 1).
struct StatFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// What every `stat` command shares: `-o`, and the hidden root that tests point at a
/// fixture tree of `/proc` and `/sys`.
struct StatCommonOptions: ParsableArguments {
    @Option(name: [.customShort("o"), .long], help: "Output format.")
    var output: String?

    /// Tests only: read `/proc` and `/sys` under this directory instead of `/`.
    @Option(name: .customLong("stat-root"), help: .hidden)
    var root: String?

    /// The chosen format among `formats` (the first is the default), accepted ignoring case
    /// as the reference's flag parser does (its formatter then refuses `JSON`, as here).
    func format(among formats: [String]) throws -> String {
        guard let output else { return formats[0] }
        guard formats.contains(where: { $0.lowercased() == output.lowercased() }) else {
            throw StatFailure(invalidChoice(output, flag: "-o, --output", formats))
        }
        return output
    }

    /// The statter over `/` (or the hidden root), failing as the reference's middleware does.
    func statter() throws -> HostStatter {
        do {
            return try HostStatter(fileSystem: root.map { RootedFileSystem(root: $0) } ?? RootedFileSystem.machine)
        } catch {
            throw StatFailure("initialize workspace stats collector: \(error)")
        }
    }
}

/// `--prefix Ki|Mi|Gi|Ti`, accepted ignoring case; only the exact spelling scales
/// (clistat's `ParsePrefix`), so `gi` shows bytes.
func parsePrefix(_ text: String) throws -> StatPrefix {
    let choices = ["Ki", "Mi", "Gi", "Ti"]
    guard choices.contains(where: { $0.lowercased() == text.lowercased() }) else {
        throw StatFailure(invalidChoice(text, flag: "--prefix", choices))
    }
    return StatPrefix(parsing: text)
}

/// The flag parser's text for a value outside an enum (`item`: the list entry at fault).
func invalidChoice(_ value: String, item: String? = nil, flag: String, _ choices: [String]) -> String {
    let list = choices.joined(separator: " ")
    return "invalid argument \(goQuote(value)) for \"\(flag)\" flag: invalid choice: \(item ?? value), should be one of [\(list)]"
}

/// The formatter's output of one figure: its text, or `json.MarshalIndent` of it.
func formatFigure(_ result: StatResult?, as format: String) throws -> String {
    switch format {
    case "text": return StatResult.text(result)
    case "json":
        switch StatResult.json(result) {
        case .success(let json): return json
        case .failure(let error): throw StatFailure("marshal output to JSON: \(error)")
        }
    default: throw StatFailure("unknown output format \(goQuote(format))")
    }
}

extension Result {
    /// The value, or the failure as the command's error.
    func orFail() throws -> Success {
        switch self {
        case .success(let value): return value
        case .failure(let error): throw StatFailure("\(error)")
        }
    }
}
