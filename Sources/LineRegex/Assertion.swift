/// Zero-width assertions, evaluated against the scalars either side of a position.
enum Assertion: UInt8, Sendable {
    case beginText, endText, beginLine, endLine, wordBoundary, notWordBoundary
}
