//! Every row of the drop table is exercised.
