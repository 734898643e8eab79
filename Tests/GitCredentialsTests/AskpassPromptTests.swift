import GitCredentials
import Testing

@Suite struct AskpassPromptTests {
    @Test func gitsUsernamePromptGivesTheOrigin() throws {
        let prompt = try AskpassPrompt.parse("Username for 'https://github.com': ")
        #expect(prompt == AskpassPrompt(user: "", host: "https://github.com"))
    }

    @Test func thePasswordPromptNamesTheUser() throws {
        let prompt = try AskpassPrompt.parse("Password for 'https://alice@github.com': ")
        #expect(prompt == AskpassPrompt(user: "alice", host: "https://github.com"))
    }

    @Test func aPortAndAnEncodedUserAreKept() throws {
        let prompt = try AskpassPrompt.parse("Password for 'http://a%40b@127.0.0.1:8080': ")
        #expect(prompt == AskpassPrompt(user: "a@b", host: "http://127.0.0.1:8080"))
    }

    @Test func quotesAndColonsAreStrippedAsVSCodeDoes() throws {
        #expect(try AskpassPrompt.parse("Username for \"https://example.com\"::").host == "https://example.com")
    }

    @Test func malformedPromptsGetTheReferencesWords() {
        #expect(throws: AskpassPromptError("askpass prompt must contain 3 words; got 2: \"Username for\"")) {
            try AskpassPrompt.parse("Username for")
        }
        #expect(throws: AskpassPromptError("unknown prompt type: \"Token for 'https://x'\"")) {
            try AskpassPrompt.parse("Token for 'https://x'")
        }
        #expect(throws: AskpassPromptError("unsupported scheme: \"ssh\"")) {
            try AskpassPrompt.parse("Username for 'ssh://host'")
        }
        #expect(throws: AskpassPromptError("host is empty")) {
            try AskpassPrompt.parse("Username for 'https://'")
        }
    }

    @Test func anOversizedPromptIsRefused() {
        #expect(throws: AskpassPromptError.self) {
            try AskpassPrompt.parse("Username for 'https://" + String(repeating: "a", count: AskpassPrompt.maxBytes) + "'")
        }
    }

    @Test func askpassRunsAreToldFromOtherCommands() {
        #expect(AskpassPrompt.isAskpass(arguments: ["Username for 'https://x': "], environmentNames: ["GIT_PREFIX", "HOME"]))
        #expect(!AskpassPrompt.isAskpass(arguments: ["Username for 'https://x': "], environmentNames: ["HOME"]))
        #expect(!AskpassPrompt.isAskpass(arguments: ["stat"], environmentNames: ["GIT_PREFIX"]))
        #expect(!AskpassPrompt.isAskpass(arguments: ["Username x", "y"], environmentNames: ["GIT_PREFIX"]))
    }
}
