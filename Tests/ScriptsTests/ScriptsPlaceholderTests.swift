import Testing
@testable import Scripts
