import AgentCore
#if canImport(Glibc)
import Glibc
#endif

/// Where the screen backend keeps its files: `<base>/config` (the reference's settings) and
/// `<base>/sockets`, the `SCREENDIR` of every screen the agent starts, so the agent's
/// sessions live apart from the user's own screens (and `screen -ls` with that `SCREENDIR`
/// lists only them). `base` is `$TMPDIR/coder-screen` by default; both directories are
/// the agent's user's, mode 0700 (screen refuses a `SCREENDIR` others may enter).
struct ScreenDirectory: Sendable, Equatable {
    let base: String

    var config: String { base + "/config" }
    var sockets: String { base + "/sockets" }

    /// The reference's settings: no startup message or message waits, the terminal's own
    /// scrollback for xterm, alternate screen emulation, background colour erase, the web
    /// terminal's `TERM`, and `^S` as the command key (`^A` is too useful to take).
    static let settings = [
        "startup_message off", "msgminwait 0", "msgwait 0", "termcapinfo xterm* ti@:te@", "altscreen on", "defbce on",
        "term xterm-256color", "escape ^Ss",
    ]

    /// `$TMPDIR/coder-screen` (`/tmp` without `TMPDIR`), as the reference's `os.TempDir()`.
    static func defaultBase(environment: [String: String]) -> String {
        let temporary = environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        return (temporary.hasSuffix("/") ? String(temporary.dropLast()) : temporary) + "/coder-screen"
    }

    struct SetupError: Error, CustomStringConvertible {
        let description: String
    }

    /// Creates both directories (or checks that they are the agent user's own directories,
    /// not links, and makes them 0700) and writes the config file.
    func prepare() throws(SetupError) {
        try Self.ownDirectory(base)
        try Self.ownDirectory(sockets)
        do {
            try AtomicFile.write(Array(Self.settings.joined(separator: "\n").utf8), to: config, mode: 0o600)
        } catch {
            throw SetupError(description: "write \(config): \(error)")
        }
    }

    private static func ownDirectory(_ path: String) throws(SetupError) {
        if mkdir(path, 0o700) != 0, errno != EEXIST {
            throw SetupError(description: "mkdir \(path): \(SystemCallError.message(errno))")
        }
        guard let info = FileInfo.of(path: path), info.kind == .directory else {
            throw SetupError(description: "\(path) is not a directory")
        }
        guard info.owner == UInt32(geteuid()) else { throw SetupError(description: "\(path) belongs to another user") }
        if info.permissions != 0o700, chmod(path, 0o700) != 0 {
            throw SetupError(description: "chmod \(path): \(SystemCallError.message(errno))")
        }
    }
}
