import AgentCore
import AgentHTTP
import ArgumentParser

/// The SSH server's flags and their environment twins.
public struct SSHOptions: ParsableArguments {
    @Option(name: .long, help: "A loopback listener for the SSH server (host:port, e.g. 127.0.0.1:2222), serving what tailnet ports 1 and 22 serve; anyone who can reach it gets a shell as the agent's user. Env CODER_AGENT_SSH_ADDRESS. Default: off.")
    var sshAddress: String?

    @Option(name: .long, help: "Let --ssh-address be beyond loopback (0.0.0.0:2222, a LAN address): anyone who can reach it gets a shell as the agent's user without authentication; the agent warns at start. true or false. Env CODER_AGENT_SSH_ALLOW_NON_LOOPBACK. Default false: such an address is refused.")
    var sshAllowNonLoopback: String?

    @Option(name: .long, help: "Refuse SFTP and scp, rsync, sftp and nc commands (exit status 65), as a do-not-trespass sign, not security: true or false. Env CODER_AGENT_BLOCK_FILE_TRANSFER. Default false.")
    var blockFileTransfer: String?

    @Option(name: .long, help: "Refuse ssh -L (direct-tcpip): true or false. Env CODER_AGENT_BLOCK_LOCAL_PORT_FORWARDING. Default false.")
    var blockLocalPortForwarding: String?

    @Option(name: .long, help: "Refuse ssh -R (tcpip-forward): true or false. Env CODER_AGENT_BLOCK_REVERSE_PORT_FORWARDING. Default false.")
    var blockReversePortForwarding: String?

    @Option(name: .long, help: "SSH keepalive (Go duration): from 3s up, probes at a third and two thirds of it and a connection silent for all of it closed; below 3s, the longest a connection may last; 0 neither. Env CODER_AGENT_SSH_MAX_TIMEOUT. Default 72h.")
    var sshMaxTimeout: String?

    public init() {}

    public struct Configuration: Sendable, Equatable {
        /// nil: no loopback listener.
        public var address: BindTarget?
        /// `--ssh-allow-non-loopback`: ``address`` may be beyond loopback.
        public var allowNonLoopback: Bool
        public var policy: SSHPolicy
        /// `--ssh-max-timeout` (``SSHTimeoutRule``).
        public var maxTimeout: Duration

        public init(
            address: BindTarget? = nil, allowNonLoopback: Bool = false, policy: SSHPolicy = SSHPolicy(), maxTimeout: Duration = .seconds(72 * 3600)
        ) {
            self.address = address
            self.allowNonLoopback = allowNonLoopback
            self.policy = policy
            self.maxTimeout = maxTimeout
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
        let allowNonLoopback =
            try settings.bool(
                sshAllowNonLoopback, flag: "--ssh-allow-non-loopback", variable: "CODER_AGENT_SSH_ALLOW_NON_LOOPBACK") ?? false
        // An unauthenticated shell on every interface only when the operator says so.
        if let target = address.flatMap({ $0 }), !target.isLoopback, !allowNonLoopback {
            let source = sshAddress != nil ? "--ssh-address" : "CODER_AGENT_SSH_ADDRESS"
            throw ConfigurationError(
                "\(source): \(target) is beyond loopback, where anyone who can reach it gets a shell without authentication; "
                    + "set --ssh-allow-non-loopback (CODER_AGENT_SSH_ALLOW_NON_LOOPBACK=true) to mean it")
        }
        let policy = SSHPolicy(
            blockFileTransfer: try settings.bool(blockFileTransfer, flag: "--block-file-transfer", variable: "CODER_AGENT_BLOCK_FILE_TRANSFER") ?? false,
            blockLocalPortForwarding: try settings.bool(
                blockLocalPortForwarding, flag: "--block-local-port-forwarding", variable: "CODER_AGENT_BLOCK_LOCAL_PORT_FORWARDING") ?? false,
            blockReversePortForwarding: try settings.bool(
                blockReversePortForwarding, flag: "--block-reverse-port-forwarding", variable: "CODER_AGENT_BLOCK_REVERSE_PORT_FORWARDING") ?? false)
        let maxTimeout = try settings.parsed(
            sshMaxTimeout, flag: "--ssh-max-timeout", variable: "CODER_AGENT_SSH_MAX_TIMEOUT", { try GoDuration.parse($0) })
        return Configuration(address: address.flatMap { $0 }, allowNonLoopback: allowNonLoopback, policy: policy, maxTimeout: maxTimeout ?? SSHTimeoutRule.defaultTimeout)
    }
}

struct SSHAddressError: Error, CustomStringConvertible {
    let description: String
}
