import AgentCore

/// Where the resolver looks, and which user sources may be added.
public enum ContextScanRoots {
    /// The roots in order: the working directory (when known), the built-ins `~/.coder`,
    /// `~/.coder/skills` and `~/.claude/plugins/cache` (canonicalized; skipped when that
    /// fails), then the user sources in the order added, each carrying its own path as
    /// `source_path`. The resolver keeps the first occurrence of a path, so a user source that
    /// is also a built-in is attributed to the built-in.
    public static func make(
        workingDirectory: String?, home: String, userSources: [String], fileSystem: any ContextFileSystem
    ) -> [ContextScanRoot] {
        var roots: [ContextScanRoot] = []
        if let workingDirectory, !workingDirectory.isEmpty { roots.append(ContextScanRoot(path: workingDirectory)) }
        for builtIn in [".coder", ".coder/skills", ".claude/plugins/cache"] {
            if let path = try? fileSystem.canonicalPath(joinPath(home, builtIn)) { roots.append(ContextScanRoot(path: path)) }
        }
        for source in userSources {
            let path = (try? fileSystem.canonicalPath(source)) ?? source
            roots.append(ContextScanRoot(path: path, userSource: source))
        }
        return roots
    }
}

/// A user source's path rules: its identity is lexical, and an added one must resolve inside
/// an allowed root.
public enum ContextSourcePath {
    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        public var message: String
        public init(_ message: String) { self.message = message }
        public var description: String { message }
    }

    /// The longest path a source may have (Linux's PATH_MAX).
    public static let maxPathBytes = 4096

    /// Trimmed, `~` and `~/…` expanded with `home`, cleaned as Go's `filepath.Clean`; links
    /// are not resolved, and the result must be absolute.
    public static func lexical(_ raw: String, home: String) throws(Problem) -> String {
        var path = raw.goTrimmed
        guard !path.isEmpty else { throw Problem("path is empty") }
        // No file can have such a name: refused before any lookup.
        guard !path.utf8.contains(0) else { throw Problem("path contains a NUL byte") }
        guard path.utf8.count <= maxPathBytes else { throw Problem("path is longer than \(maxPathBytes) bytes") }
        if path == "~" { path = home } else if path.hasPrefix("~/") { path = home + path.dropFirst() }
        guard path.hasPrefix("/") else { throw Problem("path \(goQuote(raw.goTrimmed)) is not absolute") }
        return clean(path)
    }

    /// The check an added source passes: its canonical path (links resolved) has no `..`
    /// segment and lies inside one of `allowedRoots` (`~`, `~/.coder`, `~/.claude`, the
    /// working directory), those that cannot be canonicalized skipped; none left refuses.
    public static func checkAddable(_ lexicalPath: String, allowedRoots: [String], fileSystem: any ContextFileSystem) throws(Problem) {
        let canonical = (try? fileSystem.canonicalPath(lexicalPath)) ?? lexicalPath
        if canonical.split(separator: "/").contains("..") {
            throw Problem("path \(goQuote(lexicalPath)) contains parent traversal segments")
        }
        let roots = allowedRoots.compactMap { try? fileSystem.canonicalPath($0) }
        let inside = roots.contains { root in
            canonical == root || canonical.hasPrefix(root.hasSuffix("/") ? root : root + "/")
        }
        guard inside else { throw Problem("path \(goQuote(lexicalPath)) is not inside any allowed root") }
    }

    /// Go's `filepath.Clean` for absolute paths: repeated `/`, `.` and `..` removed lexically.
    public static func clean(_ path: String) -> String { cleanAbsolutePath(path) }
}
