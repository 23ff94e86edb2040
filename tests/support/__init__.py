"""Helpers shared by the tests (builders, clients, processes, fixtures), imported as `support.<module>`;
none of them holds a test."""
