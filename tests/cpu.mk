# cpu tests
