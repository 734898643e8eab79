#if canImport(Glibc)
import Glibc
#endif

/// What a session (SSH, the reconnecting PTY) runs, by the reference's rules: the user's
/// login shell as `<shell> -l` without a command, `<shell> -c <command>` with one, and a
/// command whose first line is `#!interpreter args` as `<interpreter> args -c <whole command>`;
/// and where the user's shell, name and home are.
public struct SessionCommand: Equatable, Sendable {
    public var argv: [String]

    public init(shell: String, command: String?) {
        guard let command, !command.isEmpty else {
            argv = [shell, "-l"]
            return
        }
        let trimmed = command.trimmingWhitespace()
        if trimmed.hasPrefix("#!") {
            let firstLine = trimmed.dropFirst(2).prefix { $0 != "\n" }
            let words = Self.shellWords(String(firstLine))
            if let interpreter = words.first {
                argv = [interpreter] + words.dropFirst() + ["-c", command]
                return
            }
        }
        argv = [shell, "-c", command]
    }

    /// Splits `text` as a POSIX shell splits words: blanks separate, single quotes keep
    /// everything, double quotes keep all but `\"` and `\\`, a backslash outside quotes
    /// escapes the next character.
    public static func shellWords(_ text: String) -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        var quote: Character?
        var escaped = false
        for character in text {
            if escaped {
                current.append(character)
                escaped = false
                continue
            }
            switch (quote, character) {
            case (nil, "\\"), ("\"", "\\"):
                escaped = true
                inWord = true
            case (nil, "'"), (nil, "\""):
                quote = character
                inWord = true
            case ("'", "'"), ("\"", "\""):
                quote = nil
            case (nil, " "), (nil, "\t"):
                if inWord { words.append(current) }
                current = ""
                inWord = false
            default:
                current.append(character)
                inWord = true
            }
        }
        if inWord { words.append(current) }
        return words
    }

    /// The agent's user's login shell: `/etc/passwd`'s seventh field for the user, else
    /// `$SHELL`; nil when neither names one.
    public static func loginShell(environment: [String: String], passwd: String = "/etc/passwd") -> String? {
        if let user = currentUserName(), let bytes = AtomicFile.read(passwd, maxBytes: 16 << 20) {
            for line in bytes.split(separator: UInt8(ascii: "\n")) {
                let fields = line.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
                guard fields.count >= 7, String(decoding: fields[0], as: UTF8.self) == user else { continue }
                let shell = String(decoding: fields[6], as: UTF8.self)
                if !shell.isEmpty { return shell }
            }
        }
        if let shell = environment["SHELL"], !shell.isEmpty { return shell }
        return nil
    }

    /// The name of the process's user (getpwuid), or nil.
    public static func currentUserName() -> String? {
        guard let entry = getpwuid(getuid()), let name = entry.pointee.pw_name else { return nil }
        return String(cString: name)
    }

    /// The user's home directory (getpwuid, else `$HOME`, else `/`).
    public static func homeDirectory(environment: [String: String]) -> String {
        if let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir {
            let home = String(cString: dir)
            if !home.isEmpty { return home }
        }
        return environment["HOME"] ?? "/"
    }

    /// Where a session starts: the manifest's directory when it is one, else the user's home.
    public static func workingDirectory(manifestDirectory: String?, environment: [String: String]) -> String {
        if let directory = manifestDirectory, !directory.isEmpty, FileInfo.following(path: directory)?.kind == .directory { return directory }
        return homeDirectory(environment: environment)
    }
}
