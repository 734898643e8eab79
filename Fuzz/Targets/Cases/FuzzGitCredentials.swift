import AgentJSON
import GitCredentials

/// What git and coderd hand the git helpers: the askpass prompt (a parsed origin is an
/// http(s) URL without spaces that parses back to itself), coderd's external-auth answer
/// (its `-o json` output is JSON that decodes to the same answer), an `--extra` path into it,
/// and a VS Code settings file (the merged file is a JSON object with both settings).
public func fuzzGitCredentials(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    switch input.byte() % 4 {
    case 0:
        let prompt = String(decoding: input.rest(), as: UTF8.self)
        if let parsed = try? AskpassPrompt.parse(prompt) {
            require(parsed.host.hasPrefix("http://") || parsed.host.hasPrefix("https://"), "not http(s): \(parsed.host)")
            require(!parsed.host.contains(" "), "a space in the host")
            let again = try? AskpassPrompt.parse("Username for '\(parsed.host)': ")
            require(again?.host == parsed.host, "the host does not parse back: \(parsed.host)")
        }
    case 1:
        if let answer = try? ExternalAuthResponse.decode(input.rest()) {
            let again = try? ExternalAuthResponse.decode(Array(answer.indentedJSON.utf8))
            require(again?.accessToken == answer.accessToken && again?.url == answer.url, "-o json does not decode back")
            _ = answer.askpassAnswer(promptUser: "")
        }
    case 2:
        let path = String(decoding: input.data(maxLength: 64), as: UTF8.self)
        if let extra = try? JSONValue.parseFirst(input.rest()) {
            _ = ExtraPath.lookup(path, in: extra)
        }
    default:
        if let merged = try? VSCodeGitAuthOverride.merged(input.rest()) {
            let value = try? JSONValue.parseWhole(merged)
            require(value?["git.useIntegratedAskPass"] != nil && value?["github.gitAuthentication"] != nil, "a setting is missing")
        }
    }
    return 0
}
