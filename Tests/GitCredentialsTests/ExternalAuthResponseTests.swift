import AgentJSON
import GitCredentials
import Testing

@Suite struct ExternalAuthResponseTests {
    @Test func githubStyleTokensAreTheUsername() throws {
        let token = try ExternalAuthResponse.decode(Array(#"{"access_token":"gho_1","username":"gho_1","password":"","url":"","type":"github"}"#.utf8))
        #expect(token.askpassAnswer(promptUser: "") == "gho_1")
        #expect(token.askpassAnswer(promptUser: "gho_1") == "gho_1")
    }

    @Test func gitlabStyleAnswersNameUserThenPassword() throws {
        let token = try ExternalAuthResponse.decode(Array(#"{"access_token":"glpat","username":"oauth2","password":"glpat"}"#.utf8))
        #expect(token.askpassAnswer(promptUser: "") == "oauth2")
        #expect(token.askpassAnswer(promptUser: "oauth2") == "glpat")
    }

    @Test func keysMatchAsGoMatchesThemAndWrongKindsAreLeftEmpty() throws {
        let token = try ExternalAuthResponse.decode(Array(#"{"Access_Token":"t","url":7,"token_extra":"no"}"#.utf8))
        #expect(token.accessToken == "t")
        #expect(token.url == "")
        #expect(token.tokenExtra == nil)
    }

    @Test func aBodyThatIsNotAnObjectIsAnError() {
        #expect(throws: ExternalAuthDecodeError.self) { try ExternalAuthResponse.decode(Array("[]".utf8)) }
        #expect(throws: ExternalAuthDecodeError.self) { try ExternalAuthResponse.decode(Array("{".utf8)) }
    }

    @Test func jsonOutputKeepsTheStructsOrderAndSortsTheExtraMap() throws {
        let token = try ExternalAuthResponse.decode(Array(#"{"access_token":"a<b","token_extra":{"z":1,"a":{"y":true,"b":null}},"type":"slack"}"#.utf8))
        #expect(
            token.indentedJSON == """
                {
                  "access_token": "a\\u003cb",
                  "token_extra": {
                    "a": {
                      "b": null,
                      "y": true
                    },
                    "z": 1
                  },
                  "url": "",
                  "type": "slack",
                  "expires_at": "0001-01-01T00:00:00Z",
                  "username": "",
                  "password": ""
                }
                """)
    }

    @Test func accessTokenOutputFollowsTheReferencesChoice() throws {
        var token = ExternalAuthResponse()
        token.accessToken = "tok"
        #expect(try ExternalAuthAccessToken.output(token, extra: "", json: false) == .init(text: "tok", failed: false))
        #expect(throws: GitCredentialsFailure.message("no extra properties found for token")) {
            try ExternalAuthAccessToken.output(token, extra: "a.b", json: false)
        }
        token.tokenExtra = try JSONValue.parseWhole(Array(#"{"authed_user":{"id":"U1"}}"#.utf8))
        #expect(try ExternalAuthAccessToken.output(token, extra: "authed_user.id", json: false) == .init(text: "U1", failed: false))
        token.url = "https://coder.example.com/external-auth/github"
        #expect(try ExternalAuthAccessToken.output(token, extra: "", json: false) == .init(text: token.url, failed: true))
        #expect(try ExternalAuthAccessToken.output(token, extra: "", json: true).failed)
    }

    @Test func extraPathsReadAsGJSONPrintsThem() throws {
        let extra = try JSONValue.parseWhole(Array(#"{"a":{"b.c":[1,{"d":"x"}],"n":2.5,"t":false,"z":null},"list":[3,4]}"#.utf8))
        #expect(ExtraPath.lookup("a.b\\.c.1.d", in: extra) == "x")
        #expect(ExtraPath.lookup("a.n", in: extra) == "2.5")
        #expect(ExtraPath.lookup("a.t", in: extra) == "false")
        #expect(ExtraPath.lookup("a.z", in: extra) == "")
        #expect(ExtraPath.lookup("list.#", in: extra) == "2")
        #expect(ExtraPath.lookup("list", in: extra) == "[3,4]")
        #expect(ExtraPath.lookup("a.b\\.c.1", in: extra) == #"{"d":"x"}"#)
        #expect(ExtraPath.lookup("missing.x", in: extra) == "")
        #expect(ExtraPath.lookup("list.9", in: extra) == "")
    }

    @Test func theListenBackoffStartsAtOnceAndDoublesToTenSeconds() {
        var backoff = ListenBackoff()
        let waits = (0..<9).map { _ in backoff.next() }
        #expect(waits == [.zero, .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10), .seconds(10)])
    }

    @Test func theQueryIsSortedAsGoEncodesIt() {
        var query = ExternalAuthQuery(match: "https://github.com", listen: true)
        query.chatID = "c"
        query.gitBranch = "main"
        #expect(query.items.map(\.0) == ["chat_id", "git_branch", "id", "listen", "match"])
        #expect(ExternalAuthQuery(id: "gh").items.map(\.0) == ["id", "match"])
    }
}
