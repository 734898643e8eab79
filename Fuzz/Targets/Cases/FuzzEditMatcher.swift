import AgentFiles

/// The fuzzy edit engine (edit-files): a search, a replacement and a file's content, all
/// from the input. An exact single match (or `replace_all`) with a one-line replacement must
/// give the plain substitution; several exact matches without `replace_all` must be refused;
/// an empty search is always refused; every refusal names the file; the diff is empty
/// exactly when nothing changed.
public func fuzzEditMatcher(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let replaceAll = input.bool()
    let search = input.data(maxLength: 600)
    let replacement = input.data(maxLength: 600)
    let content = input.rest()
    let path = "/w/file.txt"
    let hits = occurrences(of: search, in: content)

    let result: [UInt8]
    do {
        result = try FilesFuzzing.applyEdit(search: search, replacement: replacement, replaceAll: replaceAll, to: content, path: path)
    } catch {
        require(error.message.hasPrefix(path + ": "), "a refusal that does not name the file: \(error.message)")
        require(!(hits.count == 1 && !search.isEmpty), "a single exact match was refused: \(error.message)")
        require(!(replaceAll && !hits.isEmpty && !search.isEmpty), "replace_all with exact matches was refused: \(error.message)")
        return 0
    }
    require(!search.isEmpty, "an empty search was applied")
    require(hits.count <= 1 || replaceAll, "\(hits.count) exact matches applied without replace_all")
    if !hits.isEmpty, !replacement.contains(0x0A) {
        // A replacement without a newline is used as is: the plain substitution.
        var expected: [UInt8] = []
        var position = 0
        for hit in hits {
            expected += content[position..<hit]
            expected += replacement
            position = hit + search.count
        }
        expected += content[position...]
        require(result == expected, "the exact pass did not substitute plainly")
    }
    let diff = FilesFuzzing.unifiedDiff(path: path, old: content, new: result)
    require(diff.isEmpty == (content == result), "the diff is empty while the content changed, or the reverse")
    if !diff.isEmpty { require(diff.hasPrefix("--- \(path)\n+++ \(path)\n@@ -"), "a diff without its headers") }
    return 0
}

/// Non-overlapping exact occurrences, left to right (a plain scan, as the reference).
private func occurrences(of needle: [UInt8], in haystack: [UInt8]) -> [Int] {
    guard !needle.isEmpty, needle.count <= haystack.count else { return [] }
    var hits: [Int] = []
    var index = 0
    while index <= haystack.count - needle.count {
        if haystack[index] == needle[0], haystack[index..<(index + needle.count)].elementsEqual(needle) {
            hits.append(index)
            index += needle.count
        } else {
            index += 1
        }
    }
    return hits
}
