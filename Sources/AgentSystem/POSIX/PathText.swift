import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

// Text helpers for what `NSString` and `String(format:)` did: the agent links only
// FoundationEssentials (Foundation itself brings ICU and about 9 MiB of resident pages).

/// The directory part of `path` ("/" for a top-level entry, "." for a bare name).
public func parentDirectory(of path: String) -> String {
    var trimmed = Substring(path)
    while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
    guard let slash = trimmed.lastIndex(of: "/") else { return "." }
    if slash == trimmed.startIndex { return "/" }
    var parent = trimmed[..<slash]
    while parent.count > 1, parent.hasSuffix("/") { parent = parent.dropLast() }
    return String(parent)
}

/// The last component of `path` (trailing slashes ignored).
public func lastPathComponent(of path: String) -> String {
    var trimmed = Substring(path)
    while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
    guard let slash = trimmed.lastIndex(of: "/"), trimmed != "/" else { return String(trimmed) }
    return String(trimmed[trimmed.index(after: slash)...])
}

/// True for a regular file (symbolic links followed) with an execute bit. (Not through
/// `FileManager` attributes: without Foundation their numbers are `UInt`, not `NSNumber`.)
public func isExecutableRegularFile(_ path: String) -> Bool {
    var info = stat()
    return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG && info.st_mode & 0o111 != 0
}

/// The size of the file at `path` in bytes (0 if it cannot be read).
public func fileSize(atPath path: String) -> Int {
    var info = stat()
    return stat(path, &info) == 0 ? Int(info.st_size) : 0
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (`trimmingCharacters(in: .whitespaces)`,
    /// ASCII only: what HTTP fields and /proc files use).
    public func trimmingSpaces() -> String {
        trimming { $0 == " " || $0 == "\t" }
    }

    /// Without leading and trailing whitespace and newlines (ASCII, plus the Unicode
    /// whitespace `Character.isWhitespace` knows).
    public func trimmingWhitespace() -> String {
        trimming { $0.isWhitespace }
    }

    private func trimming(_ drop: (Character) -> Bool) -> String {
        guard let first = firstIndex(where: { !drop($0) }), let last = lastIndex(where: { !drop($0) }) else { return "" }
        return String(self[first...last])
    }
}

/// `$TMPDIR`, else /tmp (`NSTemporaryDirectory()` without Foundation), with a trailing slash.
public func temporaryDirectory() -> String {
    let directory = getenv("TMPDIR").map { String(cString: $0) } ?? ""
    let chosen = directory.isEmpty ? "/tmp" : directory
    return chosen.hasSuffix("/") ? chosen : chosen + "/"
}

extension StringProtocol {
    /// `%XX` sequences decoded (`removingPercentEncoding` without Foundation); nil when a
    /// `%` is not followed by two hex digits or the result is not UTF-8.
    public func percentDecoded() -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var iterator = utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

private func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
    default: return nil
    }
}

/// The extension of `path`'s last component, without the dot ("" if none).
public func pathExtension(of path: String) -> String {
    let name = lastPathComponent(of: path)
    guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "" }
    return String(name[name.index(after: dot)...])
}

/// Writes all of `text` to descriptor `fd` (stdout, stderr), retrying short writes.
public func writeAll(_ fd: Int32, _ text: String) {
    var bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return }
        offset += n
    }
}

/// The errno behind a file-system error: a `POSIXError`, or FoundationEssentials'
/// `CocoaError` with its underlying `POSIXError`; nil for anything else.
public func posixErrno(of error: any Error) -> Int32? {
    if let posix = error as? POSIXError { return posix.code.rawValue }
    if let cocoa = error as? CocoaError, let posix = cocoa.userInfo["NSUnderlyingError"] as? POSIXError {
        return posix.code.rawValue
    }
    return nil
}

/// A file-system error in one line, the way Go prints it ("no such file or directory").
public func errorText(_ error: any Error) -> String {
    posixErrno(of: error).map { String(cString: strerror($0)) } ?? "\(error)"
}
