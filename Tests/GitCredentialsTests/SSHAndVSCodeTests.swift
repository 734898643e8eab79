import AgentTestSupport
import Foundation
import GitCredentials
import Testing

@Suite struct SSHIdentityFilesTests {
    @Test func existingIdentityFilesAreKeptInOrderWithTheHomeExpanded() {
        let output = "user git\nidentityfile ~/.ssh/id_rsa\nidentityfile /keys/work\nidentityfile ~/.ssh/id_ed25519\nport 22\n"
        let existing: Set = ["/home/u/.ssh/id_ed25519", "/keys/work"]
        #expect(SSHIdentityFiles.parse(output, home: "/home/u", exists: { existing.contains($0) }) == ["/keys/work", "/home/u/.ssh/id_ed25519"])
    }

    @Test func theFallbackListsOpenSSHsDefaults() {
        let all = SSHIdentityFiles.parse(SSHIdentityFiles.fallbackOutput, home: "/h", exists: { _ in true })
        #expect(all.first == "/h/.ssh/id_rsa")
        #expect(all.count == 7)
    }
}

@Suite struct VSCodeGitAuthOverrideTests {
    @Test func aNewFileGetsBothSettingsTabIndented() throws {
        let text = String(decoding: try VSCodeGitAuthOverride.merged(nil), as: UTF8.self)
        #expect(text == "{\n\t\"git.useIntegratedAskPass\": false,\n\t\"github.gitAuthentication\": false\n}")
    }

    @Test func theUsersOwnSettingsAreKept() throws {
        let text = String(decoding: try VSCodeGitAuthOverride.merged(Array(#"{"github.gitAuthentication": true, "editor.fontSize": 14}"#.utf8)), as: UTF8.self)
        #expect(text == "{\n\t\"editor.fontSize\": 14,\n\t\"git.useIntegratedAskPass\": false,\n\t\"github.gitAuthentication\": true\n}")
    }

    @Test func commentsAreAnErrorAndTheFileIsLeftAlone() {
        #expect(throws: VSCodeSettingsError.self) { try VSCodeGitAuthOverride.merged(Array("{ // mine\n}".utf8)) }
    }

    @Test func applyWritesEveryEditorsFileAndStopsAtTheFirstError() throws {
        let home = NSTemporaryDirectory() + "vscode-home-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: home) }
        let paths = VSCodeGitAuthOverride.paths(home: home, dataHome: nil)
        #expect(paths.count == 6)
        #expect(paths[0] == home + "/.local/share/code-server/Machine/settings.json")
        // The third file is JSONC: the loop stops there, the files after it are not written.
        for index in [1, 2] {
            try FileManager.default.createDirectory(atPath: (paths[index] as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        }
        try TestFile.write(paths[2], "{ // comment\n}")
        try TestFile.write(paths[1], #"{"git.useIntegratedAskPass": true}"#)
        chmod(paths[1], 0o640)
        let error = VSCodeGitAuthOverride.apply(home: home, dataHome: nil)
        #expect(error?.description.contains(".vscode-insiders-server") == true)
        var info = stat()
        #expect(stat(paths[0], &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat(home + "/.local/share/code-server/Machine", &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(stat(paths[1], &info) == 0 && info.st_mode & 0o777 == 0o640)
        #expect(try String(contentsOfFile: paths[1], encoding: .utf8).contains("\"git.useIntegratedAskPass\": true"))
        #expect(try String(contentsOfFile: paths[2], encoding: .utf8) == "{ // comment\n}")
        #expect(!FileManager.default.fileExists(atPath: paths[3]))
    }
}
