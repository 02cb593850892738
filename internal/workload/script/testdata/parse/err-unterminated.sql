SELECT 'abc;
