import AgentCore
import Foundation

/// An upward sink that sends nothing (capabilities under test that do not talk upward).
public struct NoUpward: UpwardSink {
    public init() {}
    public func send(_ status: AppStatusReport) -> UpwardReceipt { .settled(.logged) }
    public func send(_ batch: BoundaryLogBatch) -> UpwardReceipt { .settled(.logged) }
    public func send(_ line: AgentLogLine) {}
    public var isConnected: Bool { false }
    public var hasControlPlane: Bool { false }
}

extension AgentContext {
    /// A context over `chatPaths` with no control plane.
    public static func forTests(
        chatPaths: ChatPaths = ChatPaths(), environment: [String: String] = [:], stateDirectory: String = NSTemporaryDirectory()
    ) -> AgentContext {
        AgentContext(chatPaths: chatPaths, manifest: ManifestStore(), upward: NoUpward(), environment: environment, stateDirectory: stateDirectory)
    }
}

/// Runs a program to completion off the cooperative pool (stderr dropped); its stdout,
/// or "" if it could not start.
@discardableResult
public func runProgram(
    _ path: String, _ arguments: [String], in directory: String? = nil, environment: [String: String] = [:], input: String? = nil
) async -> String {
    await onThread {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let stdin = input.map { _ in Pipe() }
        if let stdin { process.standardInput = stdin }
        do { try process.run() } catch { return "" }
        if let stdin, let input {
            stdin.fileHandleForWriting.write(Data(input.utf8))
            try? stdin.fileHandleForWriting.close()
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}

/// The git CLI, for tests that build real repositories (no global config: identity, branch
/// name and line endings are fixed here).
public enum GitCLI {
    /// Runs git in `directory`; returns its stdout ("" if it could not start).
    @discardableResult
    public static func run(_ arguments: [String], in directory: String) async -> String {
        await runProgram(
            "/usr/bin/git",
            ["-C", directory, "-c", "user.name=Test", "-c", "user.email=test@example.invalid",
             "-c", "init.defaultBranch=main", "-c", "core.autocrlf=false", "-c", "gc.auto=0"] + arguments)
    }
}
