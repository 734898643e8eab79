import AgentHTTP
import AgentLogging
import Foundation
import Logging

/// The daemon's settings: each flag has an environment twin; the flag wins.
struct AgentConfiguration {
    struct Flags {
        var httpAddress: String?
        var directory: String?
        var stateDir: String?
        var logLevel: String?
        var logFormat: String?
        var procPrioMgmt: String?
        var agentURL: String?
        var agentTokenFile: String?
        var prometheusAddress: String?
    }

    /// A bad value: one line naming the flag, its env twin and what is accepted.
    struct Invalid: Error, CustomStringConvertible {
        var description: String
    }

    var httpAddress: BindTarget
    var directory: String?
    var stateDir: String
    var logLevel: Logger.Level
    var logFormat: LogFormat
    var processPriority: Bool
    /// The control plane's access URL; nil runs standalone.
    var agentURL: String?
    /// The agent token (never logged).
    var agentToken: String?
    /// Where the Prometheus metrics listener binds; nil when disabled.
    var prometheusAddress: BindTarget?

    static func resolve(flags: Flags, environment env: [String: String]) throws -> AgentConfiguration {
        func pick(_ flag: String?, _ key: String) -> (String, String)? {
            if let flag { return (flag, "--" + key) }
            let envKey = Self.envKey(key)
            if let value = env[envKey], !value.isEmpty { return (value, envKey) }
            return nil
        }
        let address: BindTarget
        if let (text, source) = pick(flags.httpAddress, "http-address") {
            do { address = try BindTarget(parsing: text) } catch {
                throw Invalid(description: "\(source): \(error.description)")
            }
        } else {
            address = try! BindTarget(parsing: BindTarget.defaultAddress)
        }
        let level: Logger.Level
        if let (text, source) = pick(flags.logLevel, "log-level") {
            guard let parsed = AgentLogging.parseLevel(text) else {
                throw Invalid(description: "\(source): invalid log level \"\(text)\" (expected trace, debug, info, notice, warning, error or critical)")
            }
            level = parsed
        } else {
            level = .info
        }
        let format: LogFormat
        if let (text, source) = pick(flags.logFormat, "log-format") {
            guard let parsed = LogFormat(rawValue: text.lowercased()) else {
                throw Invalid(description: "\(source): invalid log format \"\(text)\" (expected text or json)")
            }
            format = parsed
        } else {
            format = .text
        }
        var priority = true
        if let (text, source) = pick(flags.procPrioMgmt, "proc-prio-mgmt") {
            switch text.lowercased() {
            case "1", "true", "yes", "on": priority = true
            case "0", "false", "no", "off": priority = false
            default: throw Invalid(description: "\(source): invalid boolean \"\(text)\" (expected true or false)")
            }
        }
        var prometheus: BindTarget? = try! BindTarget(parsing: Self.defaultPrometheusAddress)
        if let text = flags.prometheusAddress ?? env["CODER_AGENT_PROMETHEUS_ADDRESS"] {
            let source = flags.prometheusAddress != nil ? "--prometheus-address" : "CODER_AGENT_PROMETHEUS_ADDRESS"
            if text.isEmpty {
                prometheus = nil
            } else {
                do { prometheus = try BindTarget(parsing: text) } catch {
                    throw Invalid(description: "\(source): \(error.description)")
                }
            }
        }
        let directory = pick(flags.directory, "directory")?.0
        if let directory, directory.contains("\0") {
            throw Invalid(description: "--directory: contains a NUL byte")
        }
        let stateDir = pick(flags.stateDir, "state-dir")?.0 ?? Self.defaultStateDir(env)
        var agentURL: String?
        var token: String?
        if let (text, source) = pick(flags.agentURL, "agent-url") {
            let components = URLComponents(string: text)
            guard let scheme = components?.scheme?.lowercased(), ["http", "https", "ws", "wss"].contains(scheme),
                  let host = components?.host, !host.isEmpty
            else {
                throw Invalid(description: "\(source): invalid URL \"\(text)\" (expected http(s)://host[:port])")
            }
            agentURL = text
            if let (file, fileSource) = pick(flags.agentTokenFile, "agent-token-file") {
                guard let contents = try? String(contentsOfFile: file, encoding: .utf8) else {
                    throw Invalid(description: "\(fileSource): cannot read \"\(file)\"")
                }
                token = contents.trimmingCharacters(in: .whitespacesAndNewlines)
            } else if let value = env["CODER_AGENT_TOKEN"], !value.isEmpty {
                token = value
            }
            guard let token, !token.isEmpty else {
                throw Invalid(description: "\(source): an agent token is required (CODER_AGENT_TOKEN or --agent-token-file)")
            }
        }
        return AgentConfiguration(
            httpAddress: address, directory: directory, stateDir: stateDir,
            logLevel: level, logFormat: format, processPriority: priority,
            agentURL: agentURL, agentToken: token, prometheusAddress: prometheus)
    }

    /// As the reference: Prometheus on loopback port 2112.
    static let defaultPrometheusAddress = "127.0.0.1:2112"

    /// `CODER_AGENT_HTTP_ADDRESS` for `http-address`; the priority switch keeps the reference's name.
    static func envKey(_ flag: String) -> String {
        if flag == "proc-prio-mgmt" { return "CODER_PROC_PRIO_MGMT" }
        if flag == "agent-url" { return "CODER_AGENT_URL" }
        if flag == "agent-token-file" { return "CODER_AGENT_TOKEN_FILE" }
        return "CODER_AGENT_" + flag.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    static func defaultStateDir(_ env: [String: String]) -> String {
        if let xdg = env["XDG_STATE_HOME"], !xdg.isEmpty { return xdg + "/workspace-agent" }
        let home = env["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSTemporaryDirectory()
        return home + "/.local/state/workspace-agent"
    }

    /// Creates the state directory (mode 0700) if it is missing.
    func prepareStateDirectory() throws {
        do {
            try FileManager.default.createDirectory(
                atPath: stateDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw Invalid(description: "--state-dir: cannot create \"\(stateDir)\": \(error.localizedDescription)")
        }
    }
}
