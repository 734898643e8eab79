import AgentCore
import AgentHTTP
import ArgumentParser

/// The SSH server's flags and their environment twins.
public struct SSHOptions: ParsableArguments {
    @Option(name: .long, help: "A loopback listener for the SSH server (host:port, e.g. 127.0.0.1:2222), serving what tailnet ports 1 and 22 serve; anyone who can reach it gets a shell as the agent's user. Env CODER_AGENT_SSH_ADDRESS. Default: off.")
    var sshAddress: String?

    public init() {}

    public struct Configuration: Sendable, Equatable {
        /// nil: no loopback listener.
        public var address: BindTarget?

        public init(address: BindTarget? = nil) {
            self.address = address
        }
    }

    public func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        let address = try settings.parsed(sshAddress, flag: "--ssh-address", variable: "CODER_AGENT_SSH_ADDRESS", allowEmpty: true) {
            text -> BindTarget? in
            guard !text.isEmpty else { return nil }
            let target = try BindTarget(parsing: text)
            guard case .tcp = target.kind else { throw SSHAddressError(description: "invalid address \"\(text)\": the SSH listener takes host:port") }
            return target
        }
        return Configuration(address: address.flatMap { $0 })
    }
}

struct SSHAddressError: Error, CustomStringConvertible {
    let description: String
}
