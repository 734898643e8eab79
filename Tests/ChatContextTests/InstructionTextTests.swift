import ChatContext
import Testing

struct InstructionTextTests {
    @Test func sanitising() {
        let text = "\r\n# Rules\r\nKeep\u{200B} it<!-- a\nmulti-line -->\rshort\u{FEFF}.<!-- open"
        #expect(InstructionText.sanitized(text) == "# Rules\nKeep it\nshort.<!-- open")
        #expect(InstructionText.sanitized("  <!--x--> \n") == "")
    }

    @Test func firstLine() {
        #expect(InstructionText.firstLine("\n\n  ## Project rules  \nmore") == "Project rules")
        #expect(InstructionText.firstLine("plain\n") == "plain")
        #expect(InstructionText.firstLine("  \n") == "")
    }
}
