import AgentCore
import AgentTestSupport
import MCPEngine
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The Python MCP servers in `Servers/` and what the tests need around them.
enum MCPTestServers {
    static let directory: String = {
        let file = "\(#filePath)"
        return String(file[..<file.lastIndex(of: "/")!]) + "/Servers"
    }()

    static var environment: [String: String] {
        var env: [String: String] = [:]
        for name in ["PATH", "HOME", "PYTHONPATH", "PYENV_ROOT", "PYENV_VERSION"] {
            if let value = getenv(name) { env[name] = String(cString: value) }
        }
        env["PYTHONUNBUFFERED"] = "1"
        return env
    }

    /// `python3 <script> <args>` as a stdio command.
    static func command(
        _ script: String, _ args: [String] = [], name: String = "test", extraEnvironment: [String: String] = [:], env: [String: String] = [:]
    )
        throws -> MCPStdioCommand
    {
        var base = environment
        base.merge(extraEnvironment) { $1 }
        let config = MCPServerConfig(name: name, transport: "stdio", command: "python3", args: ["\(directory)/\(script)"] + args, env: env)
        return try MCPStdioCommand.make(config, environment: base, directory: "/tmp")
    }

    static func connect(
        _ script: String = "mcp_test_server.py", _ args: [String] = [], timeouts: MCPClientSession.Timeouts = .init(),
        timing: MCPStdioProcess.Timing = .init(), log: LogLines = LogLines()
    ) async throws -> MCPClientSession {
        try await MCPClientSession.connect(try command(script, args), clientVersion: "test", timeouts: timeouts, timing: timing) { server, line in
            log.append(server, line)
        }
    }

    /// Whether `pid` is gone (reaped: no such process).
    static func isGone(_ pid: Int32) -> Bool { kill(pid, 0) != 0 && errno == ESRCH }

    /// Whether `pid` is gone or dead and waiting for its new parent to reap it.
    static func isGoneOrZombie(_ pid: Int32) -> Bool {
        if isGone(pid) { return true }
        guard let file = fopen("/proc/\(pid)/stat", "r") else { return true }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 512)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return true }
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let close = text.lastIndex(of: ")") else { return false }
        return text[text.index(after: close)...].hasPrefix(" Z")
    }
}

/// Log lines a session produced, for assertions.
final class LogLines: Sendable {
    private let lines = Mutex<[(String, String)]>([])
    func append(_ server: String, _ line: String) { lines.withLock { $0.append((server, line)) } }
    var all: [(server: String, line: String)] { lines.withLock { $0.map { (server: $0.0, line: $0.1) } } }
}
