import AgentCore
import CAgentSpawn
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// How a script (or a metadata command) is run: the user's shell or the script's shebang
/// interpreter, its arguments, working directory and environment.
struct ScriptCommand: Sendable, Equatable {
    /// The executable, resolved to a path.
    var executable: String
    /// argv, `argv[0]` included.
    var arguments: [String]
    var directory: String
    var environment: [String: String]

    /// Why a command could not be built; the text reaches the script's log and the dashboard.
    struct SetupError: Error, CustomStringConvertible, Equatable {
        var description: String
    }

    /// What the agent knows that every script's command needs.
    struct Context: Sendable {
        /// The agent's own environment.
        var agentEnvironment: [String: String]
        /// The latest manifest: its variables, secrets and session token (``CommandEnvironment``).
        var manifest: AgentManifest
        /// The layers every command gets, the bin dir first on PATH.
        var command: CommandEnvironment
        /// The manifest's directory, expanded; may be empty.
        var manifestDirectory: String
        /// `CODER_AGENT_TOKEN` when the manifest carries no session token (never logged).
        var agentToken: String?
        /// `CODER_AGENT_SOCKET_PATH` for `coder exp sync` (nil when the socket is off).
        var agentSocketPath: String?
        /// `<data dir>/coder-script-data/bin`, first on PATH.
        var binDirectory: String
        /// `<data dir>/coder-script-data`.
        var dataRoot: String
    }

    /// The command for `script`; `dataDirectory` is the script's `CODER_SCRIPT_DATA_DIR`
    /// (nil for a metadata command, which gets neither `CODER_SCRIPT_*` variable).
    static func make(script: String, context: Context, dataDirectory: String?) throws(SetupError) -> ScriptCommand {
        let user = UserAccount.current(environment: context.agentEnvironment)
        guard let shell = user.shell else {
            throw SetupError(description: "shell for user \"\(user.name)\" not found in /etc/passwd or $SHELL")
        }
        var environment = Self.environment(context: context, user: user, shell: shell, dataDirectory: dataDirectory)
        var words = [shell]
        if let interpreter = shebang(script) {
            guard !interpreter.isEmpty else { throw SetupError(description: "script has an empty shebang line") }
            words = interpreter
        }
        let path = environment["PATH"]
        guard let executable = resolve(words[0], path: path) else {
            throw SetupError(description: "exec: \"\(words[0])\": executable file not found in $PATH")
        }
        environment["SHELL"] = shell
        return ScriptCommand(
            executable: executable, arguments: words + ["-c", script],
            directory: workingDirectory(context.manifestDirectory, home: user.home), environment: environment)
    }

    /// The shebang's words when the script (leading whitespace trimmed) starts with `#!`:
    /// its first line, `#!` removed, split with shell quoting; nil without one.
    static func shebang(_ script: String) -> [String]? {
        let trimmed = script.drop { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard trimmed.hasPrefix("#!") else { return nil }
        let line = trimmed.dropFirst(2).prefix { $0 != "\n" }
        return ShellWords.split(String(line))
    }

    /// The manifest directory when it is an existing directory, else the home directory.
    static func workingDirectory(_ directory: String, home: String) -> String {
        var info = stat()
        if !directory.isEmpty, stat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { return directory }
        return home
    }

    /// An executable as Go's `exec.LookPath` finds it (``ExecutableLookup``), never a
    /// directory; a match relative to the current directory is refused, as Go does.
    static func resolve(_ name: String, path: String?) -> String? {
        if name.contains("/") { return agent_is_executable(name) == 1 ? name : nil }
        guard let found = ExecutableLookup.find(name, path: path), found.hasPrefix("/") else { return nil }
        return found
    }

    /// The agent's environment with `USER`, `LOGNAME`, `SHELL` under every command's layers,
    /// then the SSH and script variables and (beyond the reference) `CODER_AGENT_SOCKET_PATH`.
    static func environment(context: Context, user: UserAccount, shell: String, dataDirectory: String?) -> [String: String] {
        let base = SessionVariables.base(agent: context.agentEnvironment, manifest: [:], user: user.name, shell: shell)
        var manifest = context.manifest
        if manifest.commandSecrets.sessionToken == nil { manifest.commandSecrets.sessionToken = context.agentToken }
        var env = context.command.apply(to: base, manifest: manifest)
        if let socket = context.agentSocketPath { env["CODER_AGENT_SOCKET_PATH"] = socket }
        env["SSH_CLIENT"] = "0.0.0.0 0 0"
        env["SSH_CONNECTION"] = "0.0.0.0 0 0.0.0.0 0"
        if let dataDirectory {
            env["CODER_SCRIPT_DATA_DIR"] = dataDirectory
            env["CODER_SCRIPT_BIN_DIR"] = context.binDirectory
        }
        return env
    }
}

/// The user the agent runs as: name, home and login shell (`/etc/passwd`, else `$SHELL`).
struct UserAccount: Sendable, Equatable {
    var name: String
    var home: String
    /// nil when neither `/etc/passwd` nor `$SHELL` names one.
    var shell: String?

    static func current(environment: [String: String]) -> UserAccount {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16 << 10)
        let uid = getuid()
        var name = environment["USER"] ?? "\(uid)"
        var home = environment["HOME"] ?? "/"
        var shell: String?
        if getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil {
            name = String(cString: entry.pw_name)
            if environment["HOME"] == nil || environment["HOME"]!.isEmpty { home = String(cString: entry.pw_dir) }
            let loginShell = String(cString: entry.pw_shell)
            if !loginShell.isEmpty { shell = loginShell }
        }
        if shell == nil, let fallback = environment["SHELL"], !fallback.isEmpty { shell = fallback }
        return UserAccount(name: name, home: home, shell: shell)
    }
}

/// Splits a line into words as a POSIX shell would without expansions: blanks separate,
/// single quotes keep everything, double quotes keep all but `\"`, `\\`, `\$` and `` \` ``,
/// a backslash outside quotes escapes the next character (the reference's shellquote).
enum ShellWords {
    static func split(_ line: String) -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        var iterator = Array(line).makeIterator()
        var quote: Character?
        while let c = iterator.next() {
            switch (quote, c) {
            case (nil, " "), (nil, "\t"), (nil, "\r"):
                if inWord { words.append(current) }
                current = ""
                inWord = false
            case (nil, "'"), (nil, "\""):
                quote = c
                inWord = true
            case (nil, "\\"):
                if let next = iterator.next() { current.append(next) }
                inWord = true
            case ("'", "'"), ("\"", "\""):
                quote = nil
            case ("\"", "\\"):
                if let next = iterator.next() {
                    if !"\"\\$`".contains(next) { current.append("\\") }
                    current.append(next)
                }
            default:
                current.append(c)
                inWord = true
            }
        }
        if inWord { words.append(current) }
        return words
    }
}
