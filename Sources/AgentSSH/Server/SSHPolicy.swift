import AgentCore

/// What the SSH server refuses (the reference's switches; all off by default).
public struct SSHPolicy: Sendable, Equatable {
    /// SFTP, and commands whose first word is one of ``fileTransferCommands``: exit status 65,
    /// the exec case after ``fileTransferMessage`` on stdout. A sign, not security (any shell
    /// can still copy files).
    public var blockFileTransfer: Bool
    /// `ssh -L` (`direct-tcpip` channels are refused).
    public var blockLocalPortForwarding: Bool
    /// `ssh -R` (`tcpip-forward` requests fail).
    public var blockReversePortForwarding: Bool

    public init(blockFileTransfer: Bool = false, blockLocalPortForwarding: Bool = false, blockReversePortForwarding: Bool = false) {
        self.blockFileTransfer = blockFileTransfer
        self.blockLocalPortForwarding = blockLocalPortForwarding
        self.blockReversePortForwarding = blockReversePortForwarding
    }

    static let fileTransferCommands: Set<String> = ["nc", "rsync", "scp", "sftp"]
    static let fileTransferMessage = "\u{02}File transfer has been disabled.\n"
    static let fileTransferStatus: Int32 = 65

    /// Whether an exec'd `command` is a file transfer: its first word (shell-split), by its
    /// base name.
    static func isFileTransfer(_ command: String) -> Bool {
        guard let first = SessionCommand.shellWords(command).first else { return false }
        return fileTransferCommands.contains(String(first.split(separator: "/").last ?? Substring(first)))
    }
}
