import Foundation

/// The examples of the project's markdown files (README.md and docs/**/*.md), as the
/// doc-example convention defines them (docs/architecture.md, "Examples in the documentation"):
///
/// - A fenced block whose info string is `sh` is an **example**: the test runs it with bash
///   against a live agent, in order with the file's other examples, in one shell (variables
///   and the working directory carry over), and it must exit 0.
/// - A fenced `output` block right after an example (only blank lines between) is what that
///   example prints (stdout and stderr together), compared after normalizing: ids, hashes and
///   times; lines ending in spaces. In it, a line that is exactly `...` matches any number of
///   lines, and `<...>` matches any text within a line.
/// - `sh setup` is a command the test cannot run (it builds, installs or starts the agent:
///   `make run`, `make install`): it is checked with `bash -n`, and each `make <target>` in it
///   must name a target of the Makefile.
/// - Any other info string (`text`, `yaml`, `ini`, ...) is not an example. A shell block with
///   another attribute, an `output` block with no example before it, or a `bash`/`shell`/
///   `console` block (write `sh`) fails the test, so nothing shell-like escapes it.
struct DocExamples {
    struct Block {
        enum Kind: Equatable { case example, setup }
        var kind: Kind
        var code: String
        /// 1-based line of the opening fence.
        var line: Int
        var expected: String?
    }

    let file: String
    var blocks: [Block] = []
    var problems: [String] = []

    static let shellLanguages: Set<String> = ["sh", "bash", "shell", "console", "zsh"]

    init(file: String, text: String) {
        self.file = file
        let lines = text.components(separatedBy: "\n")
        var index = 0
        /// Index in `blocks` of the last example, while only blank lines follow it.
        var awaitingOutput: Int?
        while index < lines.count {
            let raw = lines[index]
            let trimmed = raw.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("```") else {
                if !trimmed.isEmpty { awaitingOutput = nil }
                index += 1
                continue
            }
            let indent = raw.prefix { $0 == " " }.count
            let info = trimmed.dropFirst(3).split(separator: " ").map(String.init)
            let language = info.first ?? ""
            let attributes = Array(info.dropFirst())
            let opening = index + 1
            var body: [String] = []
            index += 1
            while index < lines.count, !lines[index].trimmingCharacters(in: .whitespaces).hasPrefix("```") {
                let line = lines[index]
                body.append(line.count >= indent && line.prefix(indent).allSatisfy({ $0 == " " }) ? String(line.dropFirst(indent)) : line)
                index += 1
            }
            index += 1  // the closing fence
            let code = body.joined(separator: "\n")
            let place = "\(file):\(opening)"
            switch language {
            case "sh":
                switch attributes {
                case []:
                    blocks.append(Block(kind: .example, code: code, line: opening))
                    awaitingOutput = blocks.count - 1
                    continue
                case ["setup"]:
                    blocks.append(Block(kind: .setup, code: code, line: opening))
                default:
                    problems.append("\(place): unknown attributes \(attributes) on a sh block (none, or `setup`)")
                }
            case "output":
                if let at = awaitingOutput, blocks[at].expected == nil {
                    blocks[at].expected = code
                } else {
                    problems.append("\(place): an output block must follow an example (a sh block) directly")
                }
            case let other where Self.shellLanguages.contains(other):
                problems.append("\(place): a `\(other)` block: write `sh` (an example the test runs) or `sh setup`")
            default:
                break
            }
            awaitingOutput = nil
        }
    }

    var examples: [Block] { blocks.filter { $0.kind == .example } }
    var setups: [Block] { blocks.filter { $0.kind == .setup } }

    /// One bash script that runs every example in order, each one's output to `<dir>/<n>.out`
    /// and its number to `<dir>/current` before it starts. `set -e`: the first failing
    /// command ends the script with its status.
    func script(outputDirectory: String, rewrite: (String) -> String) -> String {
        var text = "set -eo pipefail\ncd \"$HOME\"\n"
        for (number, block) in examples.enumerated() {
            text += "echo \(number) > '\(outputDirectory)/current'\n"
            text += "{\n\(rewrite(block.code))\n} > '\(outputDirectory)/\(number).out' 2>&1 < /dev/null\n"
        }
        text += "echo done > '\(outputDirectory)/current'\n"
        return text
    }

    // MARK: Comparing outputs

    /// What varies from run to run, replaced on both sides.
    static let normalizations: [(NSRegularExpression, String)] = [
        (#"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"#, "<uuid>"),
        (#"\b[0-9a-f]{64}\b"#, "<sha256>"),
        (#"\bindex [0-9a-f]{7,40}\.\.[0-9a-f]{7,40}"#, "index <hash>..<hash>"),
        (#"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})"#, "<time>"),
        (#"\b1\d{18}\b"#, "<unix-nano>"),
        (#"\b1\d{9}\b"#, "<unix>"),
    ].map { (try! NSRegularExpression(pattern: $0.0), $0.1) }

    static func normalize(_ text: String) -> String {
        var out = text
        for (pattern, replacement) in normalizations {
            out = pattern.stringByReplacingMatches(
                in: out, range: NSRange(out.startIndex..., in: out), withTemplate: NSRegularExpression.escapedTemplate(for: replacement))
        }
        var lines = out.components(separatedBy: "\n").map { line in
            String(line.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed())
        }
        while lines.last == "" { lines.removeLast() }
        while lines.first == "" { lines.removeFirst() }
        return lines.joined(separator: "\n")
    }

    /// Whether `actual` (normalized) matches `expected` (normalized), with `...` lines and
    /// `<...>` in-line wildcards.
    static func matches(expected: String, actual: String) -> Bool {
        let expectedLines = normalize(expected).components(separatedBy: "\n")
        var pattern = "^"
        for line in expectedLines {
            if line == "..." {
                pattern += "(?:[^\\n]*\\n)*?"
            } else {
                let pieces = line.components(separatedBy: "<...>").map { NSRegularExpression.escapedPattern(for: $0) }
                pattern += pieces.joined(separator: "[^\\n]*") + "\\n"
            }
        }
        pattern += "$"
        guard let regex = try? NSRegularExpression(pattern: pattern) else { return false }
        let subject = normalize(actual) + "\n"
        return regex.firstMatch(in: subject, range: NSRange(subject.startIndex..., in: subject)) != nil
    }

    // MARK: Links

    /// The text with fenced blocks blanked out (links in code are not links).
    static func withoutCodeBlocks(_ text: String) -> String {
        var inside = false
        return text.components(separatedBy: "\n").map { line -> String in
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("```") {
                inside.toggle()
                return ""
            }
            return inside ? "" : line
        }.joined(separator: "\n")
    }

    /// GitHub's anchors for the headings: lower case, punctuation dropped (hyphens and
    /// underscores kept), spaces as hyphens.
    static func headingSlugs(_ text: String) -> Set<String> {
        var slugs: Set<String> = []
        for line in withoutCodeBlocks(text).components(separatedBy: "\n") where line.hasPrefix("#") {
            let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces).lowercased()
            let kept = title.filter { $0.isLetter || $0.isNumber || $0 == " " || $0 == "-" || $0 == "_" }
            slugs.insert(kept.replacingOccurrences(of: " ", with: "-"))
        }
        return slugs
    }

    // MARK: The files

    /// The repository's root (this file is Tests/WorkspaceAgentTests/DocExamples.swift).
    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// README.md and every markdown file under docs/, relative to the root, sorted.
    static var markdownFiles: [String] {
        var files = ["README.md"]
        let docs = repositoryRoot.appendingPathComponent("docs")
        if let walker = FileManager.default.enumerator(atPath: docs.path) {
            for case let path as String in walker where path.hasSuffix(".md") { files.append("docs/" + path) }
        }
        return files.sorted()
    }

    /// The Makefile's targets (`name:` at the start of a line; several names before one colon).
    static func makeTargets() -> Set<String> {
        let makefile = (try? String(contentsOf: repositoryRoot.appendingPathComponent("Makefile"), encoding: .utf8)) ?? ""
        var targets: Set<String> = []
        for line in makefile.components(separatedBy: "\n") {
            guard let first = line.first, first.isLetter || first == "." || first == "_",
                let colon = line.firstIndex(of: ":"), !line[colon...].hasPrefix(":="), !line.contains("=") || line.firstIndex(of: "=")! > colon
            else { continue }
            for name in line[..<colon].split(separator: " ") { targets.insert(String(name)) }
        }
        return targets
    }
}
