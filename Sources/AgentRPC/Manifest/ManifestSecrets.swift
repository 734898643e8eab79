import AgentCore
import AgentProto
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The user's secrets of a manifest (field 19): their variables for every command, and their
/// files, written on every fetch. Values are never logged, shown or put in an error.
//
// The control plane is not trusted to have validated them (coderd's rules: a name of
// `[A-Za-z_][A-Za-z0-9_]*`, a path from `~/` or `/`, a value of at most 24 KiB without NUL):
// what would break every command, or write outside the place the path names, is refused with
// a warning, and the rest is applied as the reference applies it. Memory: at most `maxSecrets`
// secrets per manifest (coderd allows 50), their variables at most `maxVariableBytes` together.
public enum ManifestSecrets {
    /// Secrets applied per manifest; the rest are left out with one warning.
    public static let maxSecrets = 256
    /// `NAME=value` of one variable, at most: the kernel refuses a larger one (MAX_ARG_STRLEN,
    /// 128 KiB with its NUL) and with it every command's `execve`.
    public static let maxVariableEntryBytes = (128 << 10) - 1
    /// All the secrets' variables together, at most (coderd allows 200 KiB of values).
    public static let maxVariableBytes = 256 << 10
    /// A path of more bytes is refused (coderd's limit, PATH_MAX).
    public static let maxPathBytes = 4096

    /// The variables of `secrets` (those with an `env_name`), raw, later ones winning; each
    /// one refused is reported with its name and why.
    public static func variables(
        _ secrets: [Coder_Agent_V2_WorkspaceSecret]
    ) -> (variables: [String: String], refused: [(name: String, reason: String)]) {
        var variables: [String: String] = [:]
        var refused: [(name: String, reason: String)] = []
        var total = 0
        for secret in secrets.prefix(maxSecrets) where !secret.envName.isEmpty {
            let name = secret.envName
            guard !name.utf8.contains(UInt8(ascii: "=")), !name.utf8.contains(0) else {
                refused.append((name, "the name contains \"=\" or a NUL byte"))
                continue
            }
            let bytes = Array(secret.value)
            guard !bytes.contains(0) else {
                refused.append((name, "the value contains a NUL byte, which no environment can hold"))
                continue
            }
            guard let value = String(validating: bytes, as: UTF8.self) else {
                refused.append((name, "the value is not UTF-8"))
                continue
            }
            let size = name.utf8.count + 1 + bytes.count
            guard size <= maxVariableEntryBytes else {
                refused.append((name, "the variable is larger than 128 KiB, the kernel's limit for one"))
                continue
            }
            let previous = variables[name].map { name.utf8.count + 1 + $0.utf8.count } ?? 0
            guard total - previous + size <= maxVariableBytes else {
                refused.append((name, "the secrets' variables would exceed 256 KiB together"))
                continue
            }
            total += size - previous
            variables[name] = value
        }
        return (variables, refused)
    }

    /// Where a secret's `file_path` resolves, or why it is not written.
    public enum FilePath: Equatable, Sendable {
        /// No path: not a file secret.
        case none
        case refused(String)
        /// A clean absolute path; `home` is set for a `~/` path, which must stay under it.
        case path(String, home: String?)
    }

    /// The reference's rules (empty skipped, `~/` is the home directory, cleaned); refused beyond
    /// them: NUL, over ``maxPathBytes``, relative (the reference's is the agent's cwd), any `..`.
    public static func resolve(_ raw: String, home: String?) -> FilePath {
        guard !raw.isEmpty else { return .none }
        guard !raw.utf8.contains(0) else { return .refused("the path contains a NUL byte") }
        guard raw.utf8.count <= maxPathBytes else { return .refused("the path is longer than \(maxPathBytes) bytes") }
        let relative: Substring
        var base = ""
        var within: String?
        if raw.hasPrefix("~/") {
            guard let home, !home.isEmpty else { return .refused("home directory unknown") }
            relative = raw.dropFirst(2)
            base = home + "/"
            within = cleanAbsolutePath(home)
        } else if raw.hasPrefix("/") {
            relative = raw[...]
        } else {
            return .refused("the path is neither absolute nor in the home directory (~/)")
        }
        if relative.split(separator: "/").contains("..") { return .refused("the path has a \"..\" component") }
        return .path(cleanAbsolutePath(base + relative), home: within)
    }

    /// Writes every secret with a `file_path`, in manifest order; nothing here is fatal:
    /// each failure is logged and the next secret written. Returns the paths written.
    @discardableResult
    public static func writeFiles(_ secrets: [Coder_Agent_V2_WorkspaceSecret], home: String?, logger: Logger) -> [String] {
        if secrets.count > maxSecrets {
            logger.warning("secrets beyond the first \(maxSecrets) are ignored", metadata: ["count": "\(secrets.count)"])
        }
        var seen: [String: String] = [:]
        var written: [String] = []
        for secret in secrets.prefix(maxSecrets) {
            let shown = Self.shown(secret.filePath)
            switch resolve(secret.filePath, home: home) {
            case .none:
                continue
            case .refused(let reason):
                logger.warning("secret file not written", metadata: ["file_path": "\(shown)", "reason": "\(reason)"])
            case .path(let path, let within):
                if let first = seen[path] {
                    logger.warning(
                        "multiple secrets resolve to the same file path; later secret in manifest order will win (not user-controllable)",
                        metadata: ["resolved_path": "\(path)", "first_file_path": "\(first)", "conflicting_file_path": "\(shown)"])
                }
                seen[path] = shown
                do throws(SecretFileError) {
                    try SecretFile.store(Array(secret.value), at: path, within: within)
                    written.append(path)
                    logger.debug("wrote secret file", metadata: ["file_path": "\(path)"])
                } catch {
                    logger.warning("failed to write secret file", metadata: ["file_path": "\(path)", "error": "\(error)"])
                }
            }
        }
        return written
    }

    /// The agent's home directory as the reference finds it: `$HOME`, else the password
    /// database's entry for the agent's user; nil when neither names one.
    public static func homeDirectory() -> String? {
        if let home = getenv("HOME").map({ String(cString: $0) }), !home.isEmpty { return home }
        guard let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir else { return nil }
        let home = String(cString: dir)
        return home.isEmpty ? nil : home
    }

    /// A path as logs show it: at most 256 bytes of it, quoted as Go does when it holds a
    /// control character.
    static func shown(_ path: String) -> String {
        let cut = path.utf8.count <= 256 ? path : String(decoding: path.utf8.prefix(256), as: UTF8.self) + "…"
        return cut.utf8.contains { $0 < 0x20 || $0 == 0x7F } ? goQuote(cut) : cut
    }
}

/// Why a secret file was not written: a system call's error, or a rule of ``SecretFile``.
public struct SecretFileError: Error, CustomStringConvertible, Sendable {
    public var description: String

    init(_ description: String) { self.description = description }
    init(_ error: SystemCallError) { description = error.description }
}

/// One secret file written without following what it should not follow: created 0600 (an
/// existing one keeps its mode, is truncated and rewritten), never through a link or a FIFO.
//
// - Existing parent directories are opened as any program opens them (a link to a directory
//   is followed, as `mkdir -p` does); missing ones are created 0700 one at a time below the
//   last existing one, never through a link.
// - A `~/` path's parent must resolve inside the home directory (resolved too): a link that
//   leads a home path elsewhere is refused.
// - The file itself is opened with `O_NOFOLLOW | O_NONBLOCK` and must be a regular file.
enum SecretFile {
    static func store(_ value: [UInt8], at path: String, within home: String?) throws(SecretFileError) {
        let parent = parentDirectory(of: path)
        let name = lastPathComponent(of: path)
        guard !name.isEmpty, name != "/" else { throw SecretFileError("is a directory") }
        var (directory, missing) = try openDeepestExisting(parent)
        defer { close(directory) }
        if let home {
            let resolved = joined(resolvedPath(of: directory), missing)
            let root = resolvedPath(home)
            guard resolved == root || resolved.hasPrefix(root == "/" ? "/" : root + "/") else {
                throw SecretFileError("its directory resolves to \(resolved), outside the home directory \(root)")
            }
        }
        for component in missing {
            if FilePathText.withCString(component, { mkdirat(directory, $0, 0o700) }) != 0, errno != EEXIST {
                throw SecretFileError(SystemCallError(call: "mkdir \(component)", errno: errno))
            }
            let next = FilePathText.withCString(component) { openat(directory, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            guard next >= 0 else { throw SecretFileError(SystemCallError(call: "open \(component)", errno: errno)) }
            close(directory)
            directory = next
        }
        let fd = FilePathText.withCString(name) {
            openat(directory, $0, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0o600)
        }
        guard fd >= 0 else {
            let code = errno
            if code == ELOOP { throw SecretFileError("is a symbolic link (not followed)") }
            if code == ENXIO { throw SecretFileError("is not a regular file") }
            throw SecretFileError(SystemCallError(call: "open", errno: code))
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw SecretFileError(SystemCallError(call: "fstat", errno: errno)) }
        guard info.st_mode & S_IFMT == S_IFREG else { throw SecretFileError("is not a regular file") }
        guard ftruncate(fd, 0) == 0 else { throw SecretFileError(SystemCallError(call: "truncate", errno: errno)) }
        var offset = 0
        while offset < value.count {
            let count = value.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if count < 0, errno == EINTR || errno == EAGAIN { continue }
            guard count > 0 else { throw SecretFileError(SystemCallError(call: "write", errno: count < 0 ? errno : EIO)) }
            offset += count
        }
    }

    /// The deepest existing directory on the way to `path` (opened, links followed) and the
    /// names below it still to create, outermost first.
    private static func openDeepestExisting(_ path: String) throws(SecretFileError) -> (Int32, [String]) {
        var current = path
        var missing: [String] = []
        while true {
            let fd = FilePathText.withCString(current) { open($0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
            if fd >= 0 { return (fd, missing.reversed()) }
            let code = errno
            guard code == ENOENT, current != "/" else {
                throw SecretFileError(SystemCallError(call: "open \(current)", errno: code))
            }
            missing.append(lastPathComponent(of: current))
            current = parentDirectory(of: current)
        }
    }

    /// Where an open directory really is (`/proc/self/fd`).
    private static func resolvedPath(of fd: Int32) -> String {
        readSymbolicLink("/proc/self/fd/\(fd)") ?? ""
    }

    /// `path` with every link resolved as far as it exists; the missing rest appended.
    private static func resolvedPath(_ path: String) -> String {
        guard let (fd, missing) = try? openDeepestExisting(path) else { return path }
        defer { close(fd) }
        return joined(resolvedPath(of: fd), missing)
    }

    private static func joined(_ base: String, _ names: [String]) -> String {
        names.isEmpty ? base : (base == "/" ? "" : base) + names.map { "/" + $0 }.joined()
    }
}
