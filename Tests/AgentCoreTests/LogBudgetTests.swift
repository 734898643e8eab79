import AgentCore
import Testing

/// Warnings a client can cause at will: at most so many a minute, the rest counted.
struct LogBudgetTests {
    @Test func linesPastTheBudgetAreCountedAndSaidWithTheNext() {
        let budget = LogBudget(perMinute: 2)
        let start = ContinuousClock.now
        var written: [Int] = []
        for second in [0, 1, 2, 3, 30] {
            budget.log(now: start + .seconds(second)) { written.append($0) }
        }
        #expect(written == [0, 0], "two in the first minute, three left out")
        budget.log(now: start + .seconds(61)) { written.append($0) }
        budget.log(now: start + .seconds(62)) { written.append($0) }
        #expect(written == [0, 0, 3, 0], "the next minute's first line says how many were left out")
    }
}
