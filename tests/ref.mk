# ref tests
