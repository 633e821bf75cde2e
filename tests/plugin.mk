# plugin tests
