/// Names for `\p{..}`: Unicode general categories (two-letter and one-letter groups) and `Any`.
enum GeneralCategoryName {
    static let shortNames: [String] = [
        "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No",
        "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So",
        "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn",
    ]
    static let surrogateBit: UInt32 = 1 << 27

    static func bit(of category: Unicode.GeneralCategory) -> UInt32 {
        switch category {
        case .uppercaseLetter: return 1 << 0
        case .lowercaseLetter: return 1 << 1
        case .titlecaseLetter: return 1 << 2
        case .modifierLetter: return 1 << 3
        case .otherLetter: return 1 << 4
        case .nonspacingMark: return 1 << 5
        case .spacingMark: return 1 << 6
        case .enclosingMark: return 1 << 7
        case .decimalNumber: return 1 << 8
        case .letterNumber: return 1 << 9
        case .otherNumber: return 1 << 10
        case .connectorPunctuation: return 1 << 11
        case .dashPunctuation: return 1 << 12
        case .openPunctuation: return 1 << 13
        case .closePunctuation: return 1 << 14
        case .initialPunctuation: return 1 << 15
        case .finalPunctuation: return 1 << 16
        case .otherPunctuation: return 1 << 17
        case .mathSymbol: return 1 << 18
        case .currencySymbol: return 1 << 19
        case .modifierSymbol: return 1 << 20
        case .otherSymbol: return 1 << 21
        case .spaceSeparator: return 1 << 22
        case .lineSeparator: return 1 << 23
        case .paragraphSeparator: return 1 << 24
        case .control: return 1 << 25
        case .format: return 1 << 26
        case .surrogate: return 1 << 27
        case .privateUse: return 1 << 28
        case .unassigned: return 1 << 29
        @unknown default: return 1 << 29
        }
    }

    /// Mask for a `\p` name, or nil when the name is not a supported general category.
    static func mask(for name: String) -> UInt32? {
        if name == "Any" { return (1 << 30) - 1 }
        if let index = shortNames.firstIndex(of: name) { return 1 << UInt32(index) }
        switch name {
        case "L": return 0b11111
        case "M": return 0b111 << 5
        case "N": return 0b111 << 8
        case "P": return 0b1111111 << 11
        case "S": return 0b1111 << 18
        case "Z": return 0b111 << 22
        case "C": return (1 << 25) | (1 << 26) | (1 << 27) | (1 << 28)  // Cc Cf Cs Co, as Go
        default: return nil
        }
    }
}
