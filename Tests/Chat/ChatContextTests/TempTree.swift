import AgentTestSupport
import AgentCore
import Foundation

/// A directory tree made for one test under the temporary directory, removed at the end.
final class TempTree: Sendable {
    let root: String

    init() throws {
        let base = (NSTemporaryDirectory() as NSString).appendingPathComponent("chat-context-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        // Canonical, so expected paths match what realpath answers.
        root = URL(fileURLWithPath: base).resolvingSymlinksInPath().path
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    func path(_ relative: String) -> String { relative.isEmpty ? root : root + "/" + relative }

    @discardableResult
    func write(_ relative: String, _ text: String) throws -> String {
        try write(relative, bytes: Array(text.utf8))
    }

    @discardableResult
    func write(_ relative: String, bytes: [UInt8]) throws -> String {
        let full = path(relative)
        try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try TestFile.write(full, bytes)
        return full
    }

    func mkdir(_ relative: String) throws {
        try FileManager.default.createDirectory(atPath: path(relative), withIntermediateDirectories: true)
    }

    /// A symbolic link at `relative` whose content is `target` (as given: relative or absolute).
    func link(_ relative: String, to target: String) throws {
        let full = path(relative)
        try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: full, withDestinationPath: target)
    }

    static func skill(_ name: String, description: String = "Does things.") -> String {
        "---\nname: \(name)\ndescription: \(description)\n---\n# \(name)\n\nBody.\n"
    }
}

func sha256(_ bytes: some Collection<UInt8>) -> [UInt8] {
    var hash = SHA256()
    hash.update(Array(bytes))
    return hash.finalize()
}
