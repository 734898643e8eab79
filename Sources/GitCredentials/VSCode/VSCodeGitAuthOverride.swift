import AgentJSON
#if canImport(Glibc)
import Glibc
#endif

/// Makes VS Code-family servers use the agent's `GIT_ASKPASS` instead of their own git
/// authentication: in each editor's machine settings, `git.useIntegratedAskPass` and
/// `github.gitAuthentication` set to false where the user has not set them.
public enum VSCodeGitAuthOverride {
    /// The settings the agent adds, in the order written into a new file (Go sorts them).
    public static let settings: [(String, JSONValue)] = [
        ("git.useIntegratedAskPass", .bool(false)),
        ("github.gitAuthentication", .bool(false)),
    ]
    /// A settings file larger than this is left alone with an error (settings are a few KiB).
    public static let maxFileBytes = 4 << 20

    /// code-server's, then VS Code's remote servers' machine settings, in the reference's order.
    public static func paths(home: String, dataHome: String?) -> [String] {
        let data = dataHome.flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.local/share"
        return [data + "/code-server/Machine/settings.json"]
            + [".vscode-server", ".vscode-insiders-server", ".cursor-server", ".windsurf-server", ".vscodium-server"]
            .map { home + "/" + $0 + "/data/Machine/settings.json" }
    }

    /// The file's new text: `existing` (nil: no file) with each setting added when absent,
    /// tab-indented with sorted keys as Go's `json.MarshalIndent`. Strict JSON: a file with
    /// comments (JSONC) is an error and is left as it is.
    public static func merged(_ existing: [UInt8]?) throws(VSCodeSettingsError) -> [UInt8] {
        var members: [(String, JSONValue)] = []
        if let existing {
            let value: JSONValue
            do { value = try JSONValue.parseWhole(existing) } catch { throw VSCodeSettingsError("unmarshal: \(error.description)") }
            guard case .object(let found) = value else { throw VSCodeSettingsError("unmarshal: not a JSON object") }
            members = found
        }
        for (key, value) in settings where !members.contains(where: { $0.0 == key }) {
            members.append((key, value))
        }
        return Array(JSONValue.object(members).indented("\t").utf8)
    }

    /// Applies ``merged(_:)`` to every path in order, creating missing files (0600, their
    /// directories 0700); the first error stops the loop, as the reference's does, and is
    /// returned with the path it concerns.
    public static func apply(home: String, dataHome: String?) -> VSCodeSettingsError? {
        for path in paths(home: home, dataHome: dataHome) {
            do {
                let existing = try readIfPresent(path)
                let text = try merged(existing)
                if existing == nil { try makeDirectories(parent(of: path)) }
                try write(text, to: path)
            } catch {
                return VSCodeSettingsError("\(goQuote(path)): \(error.description)")
            }
        }
        return nil
    }

    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    static func readIfPresent(_ path: String) throws(VSCodeSettingsError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw VSCodeSettingsError("read: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { throw VSCodeSettingsError("read: not a regular file") }
        guard info.st_size <= maxFileBytes else { throw VSCodeSettingsError("read: larger than \(maxFileBytes >> 20) MiB") }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var count = 0
        while count < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0, errno == EINTR { continue }
            if n < 0 { throw VSCodeSettingsError("read: \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            count += n
        }
        guard count <= maxFileBytes else { throw VSCodeSettingsError("read: larger than \(maxFileBytes >> 20) MiB") }
        return Array(bytes[0..<count])
    }

    static func makeDirectories(_ path: String) throws(VSCodeSettingsError) {
        var current = ""
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o700) != 0, errno != EEXIST {
                throw VSCodeSettingsError("mkdir all: \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Truncates and writes in place (an existing file keeps its mode and owner; a link is
    /// followed, as the editor itself would).
    static func write(_ bytes: [UInt8], to path: String) throws(VSCodeSettingsError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0o600)
        guard fd >= 0 else { throw VSCodeSettingsError("write: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw VSCodeSettingsError("write: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }
}

/// Why a settings file was not changed.
public struct VSCodeSettingsError: Error, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
