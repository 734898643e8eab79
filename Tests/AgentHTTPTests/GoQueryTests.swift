import Testing

@testable import AgentHTTP

/// Queries read as Go's `url.ParseQuery` reads them.
struct GoQueryTests {
    @Test func pairsAsGoReadsThem() {
        let query = GoQuery(raw: "a=1+2&&b=%41%2b&a=second&pa%74h=x&semi=1;2&bad=%2x&bad2=%4&flag&=empty")
        #expect(query.get("a") == "1 2", "plus is a space; the first of a repeated name")
        #expect(query.get("b") == "A+", "escapes decoded after the plus")
        #expect(query.get("path") == "x", "names are decoded too")
        #expect(query.get("semi") == nil && query.get("bad") == nil && query.get("bad2") == nil, "skipped as Go skips them")
        #expect(query.get("flag") == "" && query.get("") == "empty")
        #expect(query.names == ["a", "b", "path", "flag", ""])
        #expect(GoQuery(raw: "").pairs.isEmpty)
    }
}
