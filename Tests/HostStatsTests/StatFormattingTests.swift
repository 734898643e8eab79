@testable import HostStats
import Testing

/// The figures' text and JSON as clistat's `Result` and Go's formatters print them.
struct StatFormattingTests {
    @Test func numbersAreRoundedByMagnitudeWithTrailingZerosDropped() throws {
        #expect(StatResult.humanize(0.5234) == "0.523")
        #expect(StatResult.humanize(0.1) == "0.1")
        #expect(StatResult.humanize(1.234) == "1.23")
        #expect(StatResult.humanize(7.7700001) == "7.77")
        #expect(StatResult.humanize(12.34) == "12.3")
        #expect(StatResult.humanize(123.4) == "123")
        #expect(StatResult.humanize(9.999) == "10")
        #expect(StatResult.humanize(0) == "0")
        #expect(StatResult.humanize(-0.5) == "-0.5")
        #expect(StatResult.humanize(2.0) == "2")
        #expect(StatResult.humanize(123_456_789) == "123456789")
    }

    @Test func textIsUsedOverTotalWithPrefixUnitAndPercent() throws {
        #expect(StatResult(total: 4, unit: "cores", used: 0.5234).text == "0.523/4 cores (13%)")
        let gib = 1024.0 * 1024 * 1024
        #expect(StatResult(total: 7.77 * gib, unit: "B", used: 1.23 * gib, prefix: .gibi).text == "1.23/7.77 GiB (16%)")
        #expect(StatResult(total: nil, unit: "B", used: 1.23 * gib, prefix: .gibi).text == "1.23 GiB")
        #expect(StatResult(total: 0, unit: "cores", used: 0).text == "0/0 cores")
        #expect(StatResult(total: 2048, unit: "B", used: 1024, prefix: .kibi).text == "1/2 KiB (50%)")
        #expect(StatResult(total: 2048, unit: "B", used: 1024).text == "1024/2048 B (50%)")
        #expect(StatResult.text(nil) == "-")
    }

    @Test func percentRoundsHalvesToEven() throws {
        #expect(StatResult(total: 8, unit: "cores", used: 1).text == "1/8 cores (12%)")
        #expect(StatResult(total: 200, unit: "B", used: 1).text == "1/200 B (0%)")
        #expect(StatResult(total: 200, unit: "B", used: 3).text == "3/200 B (2%)")
        #expect(StatResult(total: 200, unit: "B", used: 5).text == "5/200 B (2%)")
        #expect(GoFloat.whole(99.5) == "100")
        #expect(GoFloat.whole(-0.2) == "-0")
    }

    @Test func oddFiguresPrintAsGoDoes() throws {
        #expect(StatResult(total: .infinity, unit: "cores", used: .nan).text == "NaN/+Inf cores (NaN%)")
        #expect(GoFloat.fixed(-.infinity) == "-Inf")
        #expect(GoFloat.fixed(1.8446744073709552e19) == "18446744073709552000")
        #expect(GoFloat.fixed(1e-7) == "0.0000001")
        #expect(GoFloat.fixed(-0.0) == "-0")
        #expect(GoFloat.fixed(.leastNonzeroMagnitude) == "0." + String(repeating: "0", count: 323) + "5")
    }

    @Test func jsonIsGoIndentedWithGoNumbers() throws {
        let cpu = try StatResult(total: 4, unit: "cores", used: 0.523).json().get()
        #expect(cpu == "{\n  \"total\": 4,\n  \"unit\": \"cores\",\n  \"used\": 0.523\n}")
        let memory = try StatResult(total: nil, unit: "B", used: 25_276_502_016, prefix: .gibi).json().get()
        #expect(memory == "{\n  \"total\": null,\n  \"unit\": \"B\",\n  \"used\": 25276502016\n}")
        #expect(try StatResult.json(nil).get() == "null")
        #expect(GoFloat.json(1e-7) == "1e-7")
        #expect(GoFloat.json(1.5e21) == "1.5e+21")
        #expect(GoFloat.json(1e21) == "1e+21")
        #expect(GoFloat.json(123e-12) == "1.23e-10")
        #expect(GoFloat.json(-0.000001) == "-0.000001")
        #expect(GoFloat.json(1e20) == "100000000000000000000")
        #expect(GoFloat.json(.nan) == nil)
    }

    @Test func jsonRefusesWhatGoRefuses() throws {
        #expect(StatResult(total: .infinity, unit: "cores", used: 0).json().failure?.description == "json: unsupported value: +Inf")
        #expect(StatResult(total: 1, unit: "cores", used: .nan).json().failure?.description == "json: unsupported value: NaN")
    }

    @Test func prefixesParseExactly() throws {
        #expect(StatPrefix(parsing: "Gi") == .gibi)
        #expect(StatPrefix(parsing: "gi") == StatPrefix.none)
        #expect(StatPrefix(parsing: "") == StatPrefix.none)
        #expect(StatPrefix.tebi.scale == 1_099_511_627_776)
    }
}

extension Result {
    /// The failure, if it is one.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
