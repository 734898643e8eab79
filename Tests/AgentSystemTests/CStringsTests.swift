import AgentSystem
import Testing

/// `withCStrings`: the strings in order, NUL-terminated each, then a NULL, as `execve` takes them.
struct CStringsTests {
    @Test func stringsThenNull() {
        let strings = ["a", "", "é x", String(repeating: "z", count: 300)]
        let read = withCStrings(strings) { array -> [String?] in
            (0...strings.count).map { index in array[index].map { String(cString: $0) } }
        }
        #expect(read == strings.map { Optional($0) } + [nil])
        #expect(withCStrings([]) { $0[0] == nil })
        #expect(withCStrings(["ls", "-l"]) { array in array[1]![2] } == 0, "NUL after each")
    }
}
