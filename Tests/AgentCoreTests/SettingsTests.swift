import AgentCore
import Testing

struct SettingsTests {
    let settings = Settings(environment: ["X_NAME": "from-env", "X_EMPTY": "", "X_FLAG": "Yes", "X_NUL": "a\0b"])

    @Test func theFlagWinsThenTheVariable() throws {
        #expect(try settings.string("flag", flag: "--name", variable: "X_NAME") == "flag")
        #expect(try settings.string(nil, flag: "--name", variable: "X_NAME") == "from-env")
        #expect(try settings.string(nil, flag: "--name", variable: "X_MISSING") == nil)
        #expect(try settings.string(nil, flag: "--name", variable: "X_EMPTY") == nil, "an empty variable is unset")
        #expect(settings.valueAllowingEmpty(nil, flag: "--name", variable: "X_EMPTY")?.text == "", "unless empty means off")
    }

    @Test func errorsNameTheirSource() throws {
        #expect(try settings.bool(nil, flag: "--flag", variable: "X_FLAG") == true)
        #expect(throws: ConfigurationError("--flag: invalid boolean \"maybe\" (expected true or false)")) {
            try settings.bool("maybe", flag: "--flag", variable: "X_FLAG")
        }
        #expect(throws: ConfigurationError("X_NUL: contains a NUL byte")) {
            try settings.string(nil, flag: "--nul", variable: "X_NUL")
        }
        struct Bad: Error, CustomStringConvertible { var description: String { "not a number" } }
        #expect(throws: ConfigurationError("X_NAME: not a number")) {
            try settings.parsed(nil, flag: "--name", variable: "X_NAME") { _ -> Int in throw Bad() }
        }
    }
}
