import AgentCore
import Foundation

/// An upward sink that sends nothing (capabilities under test that do not talk upward).
public typealias NoUpward = DiscardingUpward

extension AgentContext {
    /// A context over `chatPaths` with no control plane.
    public static func forTests(
        chatPaths: ChatPaths = ChatPaths(), environment: [String: String] = [:], stateDirectory: String = NSTemporaryDirectory(),
        sessionEnvironment: SessionEnvironment = SessionEnvironment()
    ) -> AgentContext {
        AgentContext(
            chatPaths: chatPaths, manifest: ManifestStore(), upward: NoUpward(), environment: environment, stateDirectory: stateDirectory,
            sessionEnvironment: sessionEnvironment)
    }
}

/// The git CLI, for tests that build real repositories (no global config: identity, branch
/// name and line endings are fixed here).
public enum GitCLI {
    /// Runs git in `directory`; returns its stdout ("" if it could not start).
    @discardableResult
    public static func run(_ arguments: [String], in directory: String) async -> String {
        await ChildProgram.run(
            [
                "/usr/bin/git", "-C", directory, "-c", "user.name=Test", "-c", "user.email=test@example.invalid",
                "-c", "init.defaultBranch=main", "-c", "core.autocrlf=false", "-c", "gc.auto=0",
            ] + arguments
        ).stdout
    }
}
