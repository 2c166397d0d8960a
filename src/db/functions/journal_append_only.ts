/**
 * The journal's guard: the journal is the record of every balance change, and rows are only ever added
 * (a trigger on UPDATE and DELETE calls this).
 */
import { sqlFunction } from "./SqlFunction.js"

export const journalAppendOnly = sqlFunction("journal_append_only", `
    CREATE OR REPLACE FUNCTION journal_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'the journal is append-only';
    END $$`)
