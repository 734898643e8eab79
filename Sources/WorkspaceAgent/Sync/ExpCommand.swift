import ArgumentParser

/// `workspace-agent exp`: experimental commands (hidden in the reference's `coder exp`;
/// listed here, since `exp sync` is what scripts use).
struct ExpCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exp",
        abstract: "Experimental commands: `exp sync` orders startup scripts; `exp chat context` manages the chat context.",
        subcommands: [SyncCommand.self, ChatCommand.self]
    )
}

/// `exp sync`: order startup scripts through the agent socket's unit graph.
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Order scripts: declare dependencies between units, wait for them, and mark units complete.",
        subcommands: [
            SyncPingCommand.self, SyncWantCommand.self, SyncStartCommand.self, SyncCompleteCommand.self,
            SyncStatusCommand.self, SyncListCommand.self,
        ]
    )
}
