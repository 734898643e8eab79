#if canImport(Glibc)
import Glibc
#endif

extension String {
    /// Go's `strings.TrimSpace`: Unicode white space off both ends.
    public var goTrimmed: String {
        let scalars = unicodeScalars
        guard let start = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let end = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[start...end])
    }
}

/// Go's `filepath.Clean` for an absolute path. Split on `/` bytes, not `Character`s: a `/`
/// followed by a combining mark is one grapheme but still a separator.
public func cleanAbsolutePath(_ path: String) -> String {
    var parts: [Substring.UTF8View] = []
    for part in path.utf8.split(separator: UInt8(ascii: "/")) {
        if part.elementsEqual(".".utf8) { continue }
        if part.elementsEqual("..".utf8) {
            if !parts.isEmpty { parts.removeLast() }
            continue
        }
        parts.append(Substring(part).utf8)
    }
    return "/" + parts.map { String(Substring($0)) }.joined(separator: "/")
}

/// Path lists from flags and settings (`--exp-mcp-config-files`, the chat context's
/// directories), resolved the one way the agent does it.
public enum ConfiguredPaths {
    /// Every entry as a clean absolute path: trimmed, `~` and `~/…` expanded with `home`,
    /// absolute kept, relative joined to `workingDirectory`; empty entries dropped.
    public static func resolve(_ entries: [String], home: String, workingDirectory: String) -> [String] {
        entries.compactMap { raw in
            let entry = raw.goTrimmed
            if entry.isEmpty { return nil }
            if entry == "~" { return home }
            if entry.hasPrefix("~/") { return cleanAbsolutePath(home + entry.dropFirst()) }
            if entry.hasPrefix("/") { return cleanAbsolutePath(entry) }
            return cleanAbsolutePath(workingDirectory + "/" + entry)
        }
    }
}

/// readlink(2): the text a symbolic link holds (not resolved), or nil when `path` is not a
/// link or cannot be read. Names that are not UTF-8 round-trip through ``FilePathText``.
public func readSymbolicLink(_ path: String) -> String? {
    var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
    let count = FilePathText.withCString(path) { link in
        buffer.withUnsafeMutableBytes { readlink(link, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count - 1) }
    }
    guard count >= 0 else { return nil }
    return FilePathText.decode(buffer[0..<count])
}
